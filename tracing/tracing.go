// Package tracing holds Leash's OpenTelemetry traces (spec §12.8): the tracer provider
// and its OTLP exporter, the W3C tracecontext and B3 propagators, and the server spans
// of the HTTP and gRPC edges. Tracing is off unless an exporter is configured: then New
// returns nil and the edges do no per-request work beyond a nil check.
//
// Spans carry the decision's outcome, algorithm, account and namespace or Envoy domain,
// never an API key, a secret, a request key, a descriptor value or a URL path (lease ids
// encode keys).
//
// The server spans are written here over the otel API rather than taken from the
// otelhttp and otelgrpc contrib packages: those record the URL path, and do their work
// (and allocate) for unsampled requests too, where Leash serves an unsampled request as
// with tracing off.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/propagators/b3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of Leash's spans.
const ScopeName = "github.com/leashd/leash"

// Exporters named by tracing.exporter.
const (
	ExporterNone     = "none"
	ExporterOTLPGRPC = "otlp_grpc"
	ExporterOTLPHTTP = "otlp_http"
)

// Options configures tracing (the tracing.* config keys).
type Options struct {
	// Exporter is none, otlp_grpc or otlp_http; none (or "") turns tracing off.
	Exporter string
	// Endpoint is the OTLP receiver: host:port, or for otlp_http also a URL.
	Endpoint string
	// Insecure sends without TLS.
	Insecure bool
	// SamplingRatio is the share of new traces sampled; a caller's sampling decision is
	// always followed (parent-based).
	SamplingRatio float64
	// ServiceName and ServiceVersion are the resource's service.name and service.version.
	ServiceName, ServiceVersion string
}

// Tracing is a tracer provider with its propagators; a nil *Tracing is tracing off.
type Tracing struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	server []trace.SpanStartOption // built once: options allocate
}

// New builds the exporter named by o and a provider batching spans to it; it returns nil,
// nil when o.Exporter is none. The exporter connects lazily: an unreachable receiver is
// not a start-up error (spans are dropped and the SDK reports it).
func New(ctx context.Context, o Options) (*Tracing, error) {
	var exp sdktrace.SpanExporter
	var err error
	switch o.Exporter {
	case "", ExporterNone:
		return nil, nil
	case ExporterOTLPGRPC:
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(o.Endpoint)}
		if o.Insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	case ExporterOTLPHTTP:
		var opts []otlptracehttp.Option
		if strings.Contains(o.Endpoint, "://") {
			opts = append(opts, otlptracehttp.WithEndpointURL(o.Endpoint))
		} else {
			opts = append(opts, otlptracehttp.WithEndpoint(o.Endpoint))
		}
		if o.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("tracing: unknown exporter %q", o.Exporter)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: %s exporter: %w", o.Exporter, err)
	}
	return NewWithProcessor(sdktrace.NewBatchSpanProcessor(exp), o), nil
}

// NewWithProcessor returns tracing that hands finished spans to sp (tests and benchmarks
// use an in-memory or discarding exporter); o's exporter fields are ignored.
func NewWithProcessor(sp sdktrace.SpanProcessor, o Options) *Tracing {
	name := o.ServiceName
	if name == "" {
		name = "leash"
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(name)}
	if o.ServiceVersion != "" {
		attrs = append(attrs, semconv.ServiceVersion(o.ServiceVersion))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(sp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SamplingRatio))),
		sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL, attrs...)),
	)
	return &Tracing{
		tp:     tp,
		tracer: tp.Tracer(ScopeName),
		// B3 after tracecontext: a request carrying both is continued from its B3 headers
		// (Envoy's Zipkin tracer sends B3); B3's extraction reads the single and the
		// multiple header forms.
		prop:   propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, b3IfPresent{b3.New()}),
		server: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)},
	}
}

// Tracer returns the tracer of Leash's spans.
func (t *Tracing) Tracer() trace.Tracer { return t.tracer }

// Propagator returns the propagators that read a caller's trace context (W3C
// tracecontext and B3).
func (t *Tracing) Propagator() propagation.TextMapPropagator { return t.prop }

// Shutdown flushes the spans not yet exported and stops the provider; nil-safe.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// StartHTTP starts the server span of an HTTP request, continuing the caller's trace from
// its headers. Its name is the method until EndHTTP names the route.
func (t *Tracing) StartHTTP(r *http.Request) (context.Context, trace.Span) {
	ctx := t.prop.Extract(r.Context(), headerCarrier(r.Header))
	ctx, span := t.tracer.Start(ctx, r.Method, t.server...)
	if span.IsRecording() {
		span.SetAttributes(semconv.HTTPRequestMethodKey.String(r.Method))
	}
	return ctx, span
}

// b3IfPresent extracts B3 only from a carrier holding a B3 header: B3's extraction
// allocates even when it finds none.
type b3IfPresent struct{ propagation.TextMapPropagator }

func (p b3IfPresent) Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	if c.Get("b3") == "" && c.Get("x-b3-traceid") == "" {
		return ctx
	}
	return p.TextMapPropagator.Extract(ctx, c)
}

// headerCarrier reads trace headers from HTTP headers. The propagators ask for
// lower-case names; the known ones are looked up by their canonical form directly, as
// canonicalising a name allocates.
type headerCarrier http.Header

func (c headerCarrier) Get(key string) string {
	if ck := canonicalTraceHeader(key); ck != "" {
		if v := c[ck]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return http.Header(c).Get(key)
}

func (c headerCarrier) Set(key, value string) { http.Header(c).Set(key, value) }

func (c headerCarrier) Keys() []string { return propagation.HeaderCarrier(c).Keys() }

// canonicalTraceHeader is the canonical form of a header the propagators read, or "".
func canonicalTraceHeader(key string) string {
	switch key {
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	case "b3":
		return "B3"
	case "x-b3-traceid":
		return "X-B3-Traceid"
	case "x-b3-spanid":
		return "X-B3-Spanid"
	case "x-b3-parentspanid":
		return "X-B3-Parentspanid"
	case "x-b3-sampled":
		return "X-B3-Sampled"
	case "x-b3-flags":
		return "X-B3-Flags"
	}
	return ""
}

// EndHTTP names the span after its route pattern ("METHOD /path", never the path
// itself), records the status and ends it. A 5xx marks the span as an error.
func EndHTTP(span trace.Span, route string, status int) {
	if span.IsRecording() {
		span.SetName(route)
		span.SetAttributes(semconv.HTTPRoute(route), semconv.HTTPResponseStatusCode(status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	}
	span.End()
}

// Attribute keys of a decision.
const (
	// AttrEdge is the edge that asked (limit, leases, envoy, rlqs).
	AttrEdge = attribute.Key("leash.edge")
	// AttrAccount is the account id (bounded by the config; not a secret).
	AttrAccount = attribute.Key("leash.account")
	// AttrNamespace is the namespace of a /v1 call.
	AttrNamespace = attribute.Key("leash.namespace")
	// AttrDomain is the Envoy domain.
	AttrDomain = attribute.Key("leash.domain")
	// AttrOutcome is allowed or denied.
	AttrOutcome = attribute.Key("leash.outcome")
	// AttrAlgorithm is the algorithm of the deciding limit.
	AttrAlgorithm = attribute.Key("leash.algorithm")
	// AttrDescriptors is the number of descriptors of an Envoy request.
	AttrDescriptors = attribute.Key("leash.descriptors")
	// AttrDenied is the number of an Envoy request's descriptors over their limit.
	AttrDenied = attribute.Key("leash.denied")
	// AttrErrorCode is the spec §3.6 code of a failed call.
	AttrErrorCode = attribute.Key("leash.error_code")
)

// Outcome is AttrOutcome of a verdict.
func Outcome(allowed bool) attribute.KeyValue {
	if allowed {
		return AttrOutcome.String("allowed")
	}
	return AttrOutcome.String("denied")
}

// Recording reports whether the span of ctx records. Callers check it before building
// attributes: an attribute list passed to Annotate escapes to the heap, so building one
// for an unsampled request would allocate for nothing.
func Recording(ctx context.Context) bool { return trace.SpanFromContext(ctx).IsRecording() }

// Annotate adds attrs to the span of ctx when it is recording.
func Annotate(ctx context.Context, attrs ...attribute.KeyValue) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrs...)
	}
}

// StartChild starts a child span of the span in ctx, only when that one is recording:
// work outside a sampled request (background flushes, outbox polls) makes no traces.
// The returned span is nil when none was started.
func StartChild(ctx context.Context, tr trace.Tracer, name string) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	return tr.Start(ctx, name)
}

// EndChild records err (its type only, never its text, which may name a key) and ends a
// span from StartChild; nil-safe.
func EndChild(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, errorKind(err))
	}
	span.End()
}

// errorKind is a short description of err for a span status: context cancellation and
// deadlines by name, anything else "error".
func errorKind(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "error"
}
