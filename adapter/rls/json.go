package rls

import (
	"context"
	"io"
	"log/slog"
	"net/http"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// maxJSONBody bounds a POST /json request body.
const maxJSONBody = 1 << 20

// JSONOptions configures the /json listener's handler.
type JSONOptions struct {
	// Healthy reports whether GET /healthcheck answers 200; nil means always.
	Healthy func(ctx context.Context) error
	Logger  *slog.Logger
}

// NewJSONHandler serves the peer's HTTP endpoints (spec §9.15) over svc:
// /json takes a proto-JSON RateLimitRequest and answers the proto-JSON RateLimitResponse
// of ShouldRateLimit (200 OK, 429 OVER_LIMIT); /healthcheck answers "OK" while healthy.
// Both take any method, as the peer's routes do.
func NewJSONHandler(svc *Service, opts JSONOptions) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) { serveJSON(w, r, svc, opts.Logger) })
	mux.HandleFunc("/healthcheck", func(w http.ResponseWriter, r *http.Request) {
		if opts.Healthy != nil {
			if err := opts.Healthy(r.Context()); err != nil {
				textStatus(w, http.StatusInternalServerError)
				return
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("OK"))
	})
	return mux
}

// serveJSON is /json: any method, as the peer's route; the body decides.
func serveJSON(w http.ResponseWriter, r *http.Request, svc *Service, log *slog.Logger) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	if err != nil {
		textStatus(w, http.StatusBadRequest)
		return
	}
	var req rlsv3.RateLimitRequest
	if err := protojson.Unmarshal(body, &req); err != nil {
		textStatus(w, http.StatusBadRequest)
		return
	}
	resp, err := svc.observed(r.Context(), &req) // counted as a gRPC call is
	if err != nil {
		// The peer answers 400 to every failure; Leash keeps that for the caller's
		// mistakes and reports its own failures as such (spec §9.15).
		code := http.StatusBadRequest
		switch status.Code(err) {
		case codes.Unavailable:
			code = http.StatusServiceUnavailable
		case codes.Internal, codes.Unknown:
			code = http.StatusInternalServerError
		}
		log.Debug("/json: request failed", "code", status.Code(err).String(), "err", status.Convert(err).Message())
		textStatus(w, code)
		return
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		log.Error("/json: cannot encode the reply", "err", err)
		textStatus(w, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch resp.GetOverallCode() {
	case rlsv3.RateLimitResponse_OVER_LIMIT:
		w.WriteHeader(http.StatusTooManyRequests)
	case rlsv3.RateLimitResponse_OK:
		w.WriteHeader(http.StatusOK)
	default:
		w.WriteHeader(http.StatusInternalServerError)
	}
	_, _ = w.Write(out)
}

// textStatus writes the status and its text, as the peer's http.Error does.
func textStatus(w http.ResponseWriter, code int) {
	http.Error(w, http.StatusText(code), code)
}
