package descriptors

import (
	"cmp"
	"fmt"

	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.yaml.in/yaml/v3"
)

// ResourceFile is the name errors give an xDS RateLimitConfig resource in place of a file:
// "xds:" and the resource's name (its domain when it has no name).
func ResourceFile(rc *rlconf.RateLimitConfig) string {
	return "xds:" + cmp.Or(rc.GetName(), rc.GetDomain())
}

// FromResources builds a Config from xDS RateLimitConfig resources (spec §9.14), one domain
// each. Each resource is rendered as the descriptor file of the same content and goes
// through the builder that Load uses, so it is validated exactly as that file would be;
// errors name ResourceFile and the path inside it, without a line.
func FromResources(rcs ...*rlconf.RateLimitConfig) (*Config, error) {
	srcs := make([]source, 0, len(rcs))
	for _, rc := range rcs {
		data, err := yaml.Marshal(resourceDoc(rc))
		if err != nil {
			return nil, &Error{File: ResourceFile(rc), Msg: fmt.Sprintf("cannot render as YAML: %v", err)}
		}
		srcs = append(srcs, source{name: ResourceFile(rc), data: data, noLines: true})
	}
	return build(srcs)
}

// The YAML shape of a resource: the descriptor file format, fields absent where the
// protobuf has its zero value (proto3 has no presence), except requests_per_unit, whose 0
// is as meaningful as a missing one (it denies every request).
type (
	yamlDoc struct {
		Domain      string           `yaml:"domain"`
		Descriptors []yamlDescriptor `yaml:"descriptors,omitempty"`
	}
	yamlDescriptor struct {
		Key            string           `yaml:"key"`
		Value          string           `yaml:"value,omitempty"`
		RateLimit      *yamlLimit       `yaml:"rate_limit,omitempty"`
		ShadowMode     bool             `yaml:"shadow_mode,omitempty"`
		QuotaMode      bool             `yaml:"quota_mode,omitempty"`
		DetailedMetric bool             `yaml:"detailed_metric,omitempty"`
		Metadata       map[string]any   `yaml:"metadata,omitempty"`
		Descriptors    []yamlDescriptor `yaml:"descriptors,omitempty"`
	}
	yamlLimit struct {
		Unit            string        `yaml:"unit,omitempty"`
		RequestsPerUnit *uint32       `yaml:"requests_per_unit,omitempty"`
		Unlimited       bool          `yaml:"unlimited,omitempty"`
		Name            string        `yaml:"name,omitempty"`
		Replaces        []yamlReplace `yaml:"replaces,omitempty"`
	}
	yamlReplace struct {
		Name string `yaml:"name"`
	}
)

func resourceDoc(rc *rlconf.RateLimitConfig) yamlDoc {
	return yamlDoc{Domain: rc.GetDomain(), Descriptors: resourceDescriptors(rc.GetDescriptors())}
}

func resourceDescriptors(ds []*rlconf.RateLimitDescriptor) []yamlDescriptor {
	if len(ds) == 0 {
		return nil
	}
	out := make([]yamlDescriptor, len(ds))
	for i, d := range ds {
		out[i] = yamlDescriptor{
			Key: d.GetKey(), Value: d.GetValue(),
			ShadowMode: d.GetShadowMode(), QuotaMode: d.GetQuotaMode(), DetailedMetric: d.GetDetailedMetric(),
			Descriptors: resourceDescriptors(d.GetDescriptors()),
		}
		if md := d.GetMetadata(); md != nil {
			out[i].Metadata = md.AsMap()
		}
		if p := d.GetRateLimit(); p != nil {
			l := &yamlLimit{Unlimited: p.GetUnlimited(), Name: p.GetName()}
			if u := p.GetUnit(); u != rlconf.RateLimitUnit_UNKNOWN {
				l.Unit = u.String()
			}
			if !l.Unlimited || p.GetRequestsPerUnit() != 0 {
				rpu := p.GetRequestsPerUnit()
				l.RequestsPerUnit = &rpu
			}
			for _, r := range p.GetReplaces() {
				l.Replaces = append(l.Replaces, yamlReplace{Name: r.GetName()})
			}
			out[i].RateLimit = l
		}
	}
	return out
}
