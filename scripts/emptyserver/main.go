// Command emptyserver is the ceiling for HTTP load measurements: a Go HTTP server whose
// handler reads the body and answers a fixed small JSON document, with the same server
// settings as leash. Used by scripts/bench-http.sh only.
package main

import (
	"flag"
	"io"
	"log"
	"net/http"

	"github.com/leashd/leash/httpapi"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18090", "listen address")
	flag.Parse()
	body := []byte(`{"allowed":true,"limit":1000000000,"remaining":999999999,"reset_ms":1000}`)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	log.Fatal(httpapi.NewServer(*addr, h).ListenAndServe())
}
