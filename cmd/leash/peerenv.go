package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/leashd/leash/cmd/leash/peerenv"
)

// peerEnviron is environ with envoyproxy/ratelimit's variables translated into LEASH_ ones,
// and the configuration files LEASH_CONFIG names (spec §9.18). The ignored ones are logged
// as warnings; refused ones are printed and ok is false.
func peerEnviron(environ []string, stderr io.Writer) (peerenv.Env, bool) {
	out, err := peerenv.Environ(environ)
	log := slog.New(slog.NewJSONHandler(stderr, nil))
	for _, w := range out.Warnings {
		log.Warn("peer environment: "+w, "mode", "peer-env")
	}
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(stderr, "leash: peer environment:", line)
		}
		return out, false
	}
	return out, true
}
