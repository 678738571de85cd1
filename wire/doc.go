// Package wire defines the /v1 JSON API's request and response bodies once (spec §3 to
// §8, §15): the server (httpapi) decodes and answers them, the Go client (client) sends
// and reads them. It imports only the standard library, so the client stays free of
// dependencies.
//
// The JSON tags are read by two encoders: the server's (go-json-experiment/json) and the
// client's (encoding/json). Only tag options both read alike are used: omitzero, and
// omitempty on slices. A member the spec lets a request leave out is an Optional, whose
// absence (or null) is kept apart from its zero value; the server decides what each
// member's value must be (spec §3.3), not this package.
package wire
