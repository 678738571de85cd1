package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/leashd/leash/internal/peerenv"
)

// peerEnviron is environ with envoyproxy/ratelimit's variables translated into LEASH_ ones
// (spec §9.18). The ignored ones are logged as warnings; refused ones are printed and ok
// is false.
func peerEnviron(environ []string, stderr io.Writer) ([]string, bool) {
	out, warnings, err := peerenv.Environ(environ)
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	for _, w := range warnings {
		log.Warn("peer environment: "+w, "mode", "peer-env")
	}
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(stderr, "leash: peer environment:", line)
		}
		return nil, false
	}
	return out, true
}
