package metrics

import "github.com/prometheus/client_golang/prometheus"

// XDS registers the xDS client's families (spec §9.14), leash_xds_updates_total{result}
// (applied, refused: both at 0 before use) and leash_xds_connected, and returns the
// callbacks that feed them: updated for an ACKed (true) or NACKed (false) update,
// connected as a stream starts (true) or stops (false) delivering responses. Only an
// instance with an xDS server configured calls it.
func (m *Metrics) XDS() (updated func(ok bool), connected func(up bool)) {
	updates := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leash_xds_updates_total",
		Help: "Descriptor config updates from the xDS management server: applied (ACK) or refused (NACK).",
	}, []string{"result"})
	up := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "leash_xds_connected",
		Help: "1 while a stream to the xDS management server delivers responses, else 0.",
	})
	m.Registry.MustRegister(updates, up)
	applied, refused := updates.WithLabelValues("applied"), updates.WithLabelValues("refused")
	updated = func(ok bool) {
		if ok {
			applied.Inc()
		} else {
			refused.Inc()
		}
	}
	connected = func(c bool) {
		if c {
			up.Set(1)
		} else {
			up.Set(0)
		}
	}
	return updated, connected
}
