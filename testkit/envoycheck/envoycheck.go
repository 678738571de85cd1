// Package envoycheck validates the Envoy configuration Leash ships (examples/, the sidecar
// guide) and works out the rate-limit descriptors Envoy would send for a request. Tests
// only: examples/envoy, examples/istio and deploy/helm/charttest.
//
// Validation is as strict as go-control-plane allows without an Envoy binary:
//   - YAML is converted to JSON and read with protojson, unknown fields rejected, every
//     typed_config resolved through the global registry (the blank imports below);
//   - ValidateAll (protoc-gen-validate rules) runs on the root message and, because it does
//     not look inside google.protobuf.Any, again on every unpacked typed_config;
//   - a set field or enum value marked deprecated in the Envoy API is an error.
package envoycheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"

	// Every extension type named by a typed_config in the examples, so that protojson and
	// anypb.UnmarshalNew can resolve it from protoregistry.GlobalTypes.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// ReadYAML reads every YAML document of a file into generic values (maps, lists, scalars).
func ReadYAML(path string) ([]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseYAML(data)
}

// ParseYAML decodes every document of a YAML stream; empty documents are skipped.
func ParseYAML(data []byte) ([]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []any
	for {
		var doc any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

// Unmarshal converts a generic YAML value to JSON and reads it into msg with protojson:
// unknown fields are errors and Any types resolve through protoregistry.GlobalTypes.
func Unmarshal(doc any, msg proto.Message) error {
	js, err := toJSON(doc)
	if err != nil {
		return err
	}
	opts := protojson.UnmarshalOptions{DiscardUnknown: false, Resolver: protoregistry.GlobalTypes}
	return opts.Unmarshal(js, msg)
}

func toJSON(doc any) ([]byte, error) {
	clean, err := jsonable(doc, "")
	if err != nil {
		return nil, err
	}
	return json.Marshal(clean)
}

// jsonable turns map[any]any (YAML allows non-string keys) into map[string]any.
func jsonable(v any, path string) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			c, err := jsonable(e, path+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("%s: non-string key %v", path, k)
			}
			c, err := jsonable(e, path+"."+ks)
			if err != nil {
				return nil, err
			}
			out[ks] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			c, err := jsonable(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	return v, nil
}

type validator interface{ ValidateAll() error }

// Validate runs ValidateAll on msg and on the content of every google.protobuf.Any inside
// it (recursively), and reports every set field or enum value marked deprecated.
func Validate(msg proto.Message) error {
	var errs []error
	validateRoot(msg, string(msg.ProtoReflect().Descriptor().Name()), &errs)
	return errors.Join(errs...)
}

func validateRoot(msg proto.Message, path string, errs *[]error) {
	if v, ok := msg.(validator); ok {
		if err := v.ValidateAll(); err != nil {
			*errs = append(*errs, fmt.Errorf("%s: %w", path, err))
		}
	}
	walk(msg.ProtoReflect(), path, errs)
}

func walk(m protoreflect.Message, path string, errs *[]error) {
	if m.Descriptor().FullName() == "google.protobuf.Any" {
		a, ok := m.Interface().(*anypb.Any)
		if !ok {
			*errs = append(*errs, fmt.Errorf("%s: unexpected Any implementation %T", path, m.Interface()))
			return
		}
		inner, err := anypb.UnmarshalNew(a, proto.UnmarshalOptions{Resolver: protoregistry.GlobalTypes})
		if err != nil {
			*errs = append(*errs, fmt.Errorf("%s: %w", path, err))
			return
		}
		validateRoot(inner, path+"<"+string(inner.ProtoReflect().Descriptor().FullName())+">", errs)
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := path + "." + string(fd.Name())
		if opts, ok := fd.Options().(*descriptorpb.FieldOptions); ok && opts.GetDeprecated() {
			*errs = append(*errs, fmt.Errorf("%s: field is deprecated", p))
		}
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				checkValue(fd, l.Get(i), fmt.Sprintf("%s[%d]", p, i), errs)
			}
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				checkValue(fd.MapValue(), mv, fmt.Sprintf("%s[%v]", p, k.Interface()), errs)
				return true
			})
		default:
			checkValue(fd, v, p, errs)
		}
		return true
	})
}

func checkValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, path string, errs *[]error) {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		walk(v.Message(), path, errs)
	case protoreflect.EnumKind:
		ev := fd.Enum().Values().ByNumber(v.Enum())
		if ev == nil {
			*errs = append(*errs, fmt.Errorf("%s: unknown enum number %d", path, v.Enum()))
			return
		}
		if opts, ok := ev.Options().(*descriptorpb.EnumValueOptions); ok && opts.GetDeprecated() {
			*errs = append(*errs, fmt.Errorf("%s: enum value %s is deprecated", path, ev.Name()))
		}
	}
}

// Entry is one key/value pair of a rate-limit descriptor.
type Entry struct{ Key, Value string }

// Entries builds a descriptor from key, value pairs.
func Entries(kv ...string) []Entry {
	var out []Entry
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, Entry{Key: kv[i], Value: kv[i+1]})
	}
	return out
}

// Request is the part of an HTTP request that route matching and rate-limit actions look at.
type Request struct {
	Method     string            // default GET
	Host       string            // :authority; default example.com
	Path       string            // :path, with any query string
	Headers    map[string]string // lower-case names
	RemoteAddr string            // the trusted client address (use_remote_address: true)
}

func (r Request) header(name string) (string, bool) {
	name = strings.ToLower(name)
	switch name {
	case ":method":
		if r.Method == "" {
			return "GET", true
		}
		return r.Method, true
	case ":path":
		return r.Path, true
	case ":authority", "host":
		if r.Host == "" {
			return "example.com", true
		}
		return r.Host, true
	}
	v, ok := r.Headers[name]
	return v, ok
}

// SelectRoute returns the virtual host and route Envoy would pick for req: the first virtual
// host whose domains match the host (exact or "*"), then its first matching route. Only the
// match kinds used by the examples are implemented; any other is an error.
func SelectRoute(rc *routev3.RouteConfiguration, req Request) (*routev3.VirtualHost, *routev3.Route, error) {
	host, _ := req.header(":authority")
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	for _, vh := range rc.GetVirtualHosts() {
		hit := false
		for _, d := range vh.GetDomains() {
			if d == "*" || strings.EqualFold(d, host) {
				hit = true
			}
		}
		if !hit {
			continue
		}
		for _, r := range vh.GetRoutes() {
			ok, err := routeMatches(r.GetMatch(), req)
			if err != nil {
				return nil, nil, fmt.Errorf("route %q: %w", r.GetName(), err)
			}
			if ok {
				return vh, r, nil
			}
		}
		return vh, nil, nil
	}
	return nil, nil, nil
}

func routeMatches(m *routev3.RouteMatch, req Request) (bool, error) {
	path := req.Path
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	var ok bool
	switch ps := m.GetPathSpecifier().(type) {
	case *routev3.RouteMatch_Prefix:
		ok = strings.HasPrefix(path, ps.Prefix)
	case *routev3.RouteMatch_Path:
		ok = path == ps.Path
	case *routev3.RouteMatch_PathSeparatedPrefix:
		p := ps.PathSeparatedPrefix
		ok = path == p || strings.HasPrefix(path, p+"/")
	default:
		return false, fmt.Errorf("path match %T not implemented by envoycheck", ps)
	}
	if !ok {
		return false, nil
	}
	for _, hm := range m.GetHeaders() {
		hit, err := headerMatches(hm, req)
		if err != nil || !hit {
			return false, err
		}
	}
	if len(m.GetQueryParameters()) > 0 || m.GetRuntimeFraction() != nil || m.GetGrpc() != nil ||
		m.GetTlsContext() != nil || len(m.GetDynamicMetadata()) > 0 || m.GetFilterState() != nil {
		return false, errors.New("route match conditions other than path and headers are not implemented by envoycheck")
	}
	return true, nil
}

func headerMatches(hm *routev3.HeaderMatcher, req Request) (bool, error) {
	v, present := req.header(hm.GetName())
	var hit bool
	switch s := hm.GetHeaderMatchSpecifier().(type) {
	case *routev3.HeaderMatcher_PresentMatch:
		hit = present == s.PresentMatch
	case *routev3.HeaderMatcher_StringMatch:
		if !present {
			if !hm.GetTreatMissingHeaderAsEmpty() {
				if hm.GetInvertMatch() {
					return false, errors.New("invert_match on a missing header is not implemented by envoycheck")
				}
				return false, nil
			}
			v = ""
		}
		var err error
		if hit, err = stringMatches(s.StringMatch, v); err != nil {
			return false, err
		}
	default:
		return false, fmt.Errorf("header matcher %T not implemented by envoycheck", s)
	}
	if hm.GetInvertMatch() {
		hit = !hit
	}
	return hit, nil
}

func stringMatches(sm *matcherv3.StringMatcher, v string) (bool, error) {
	fold := func(s string) string { return s }
	if sm.GetIgnoreCase() {
		fold = strings.ToLower
	}
	switch p := sm.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		return fold(v) == fold(p.Exact), nil
	case *matcherv3.StringMatcher_Prefix:
		return strings.HasPrefix(fold(v), fold(p.Prefix)), nil
	case *matcherv3.StringMatcher_Suffix:
		return strings.HasSuffix(fold(v), fold(p.Suffix)), nil
	case *matcherv3.StringMatcher_Contains:
		return strings.Contains(fold(v), fold(p.Contains)), nil
	}
	return false, fmt.Errorf("string matcher %T not implemented by envoycheck", sm.GetMatchPattern())
}

// Descriptors returns the descriptors Envoy's rate-limit filter (stage 0) sends for req from
// a route's rate_limits, in order. As in Envoy, a rate limit whose action cannot produce its
// entry (a missing header, a header_value_match that does not hold) sends no descriptor,
// except request_headers with skip_if_absent, which only drops its own entry. Only the
// actions used by the examples are implemented; any other is an error.
func Descriptors(limits []*routev3.RateLimit, req Request) ([][]Entry, error) {
	var out [][]Entry
	for i, rl := range limits {
		if rl.GetStage().GetValue() != 0 {
			continue
		}
		var entries []Entry
		produced := true
		for _, a := range rl.GetActions() {
			e, ok, err := action(a, req)
			if err != nil {
				return nil, fmt.Errorf("rate_limits[%d]: %w", i, err)
			}
			if !ok {
				produced = false
				break
			}
			if e != nil {
				entries = append(entries, *e)
			}
		}
		if produced && len(entries) > 0 {
			out = append(out, entries)
		}
	}
	return out, nil
}

// action returns the entry of one action; ok=false drops the whole descriptor, a nil entry
// with ok=true skips only this action.
func action(a *routev3.RateLimit_Action, req Request) (*Entry, bool, error) {
	switch s := a.GetActionSpecifier().(type) {
	case *routev3.RateLimit_Action_GenericKey_:
		key := s.GenericKey.GetDescriptorKey()
		if key == "" {
			key = "generic_key"
		}
		return &Entry{key, s.GenericKey.GetDescriptorValue()}, true, nil
	case *routev3.RateLimit_Action_RequestHeaders_:
		v, ok := req.header(s.RequestHeaders.GetHeaderName())
		if !ok {
			return nil, s.RequestHeaders.GetSkipIfAbsent(), nil
		}
		return &Entry{s.RequestHeaders.GetDescriptorKey(), v}, true, nil
	case *routev3.RateLimit_Action_RemoteAddress_:
		if req.RemoteAddr == "" {
			return nil, false, nil
		}
		return &Entry{"remote_address", req.RemoteAddr}, true, nil
	case *routev3.RateLimit_Action_HeaderValueMatch_:
		hvm := s.HeaderValueMatch
		all := true
		for _, hm := range hvm.GetHeaders() {
			hit, err := headerMatches(hm, req)
			if err != nil {
				return nil, false, err
			}
			all = all && hit
		}
		expect := hvm.GetExpectMatch() == nil || hvm.GetExpectMatch().GetValue()
		if all != expect {
			return nil, false, nil
		}
		key := hvm.GetDescriptorKey()
		if key == "" {
			key = "header_match"
		}
		return &Entry{key, hvm.GetDescriptorValue()}, true, nil
	}
	return nil, false, fmt.Errorf("rate-limit action %T not implemented by envoycheck", a.GetActionSpecifier())
}

// Walk calls fn for every message of type T inside msg, unpacking typed_config (Any) on the
// way, in depth-first order.
func Walk[T proto.Message](msg proto.Message, fn func(T)) {
	var visit func(m protoreflect.Message)
	visit = func(m protoreflect.Message) {
		if t, ok := m.Interface().(T); ok {
			fn(t)
		}
		if a, ok := m.Interface().(*anypb.Any); ok {
			if inner, err := anypb.UnmarshalNew(a, proto.UnmarshalOptions{}); err == nil {
				visit(inner.ProtoReflect())
			}
			return
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
				return true
			}
			switch {
			case fd.IsList():
				for i := 0; i < v.List().Len(); i++ {
					visit(v.List().Get(i).Message())
				}
			case fd.IsMap():
				if k := fd.MapValue().Kind(); k != protoreflect.MessageKind && k != protoreflect.GroupKind {
					return true
				}
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					visit(mv.Message())
					return true
				})
			default:
				visit(v.Message())
			}
			return true
		})
	}
	visit(msg.ProtoReflect())
}
