package storetest

import "github.com/leashd/leash/engine"

func (h *harness) set(key string) engine.LeaseSet {
	return engine.LeaseSet{Account: h.a, Namespace: "ns", Key: key}
}

// acquire takes a lease and checks the verdict, the echoed limit and the store's time.
func (h *harness) acquire(set engine.LeaseSet, token string, limit, ttl int64, allowed bool, active, resetMS int64) {
	h.t.Helper()
	d, err := h.s.Acquire(h.ctx, set, token, limit, ttl)
	if err != nil {
		h.t.Fatalf("Acquire(%+v, %q): %v", set, token, err)
	}
	now := h.clock.NowMS()
	if d.Allowed != allowed || d.Active != active || d.ResetMS != resetMS || d.Limit != limit || d.NowMS != now || d.LeaseID != "" {
		h.t.Errorf("at Base%+d: Acquire(%q, %q, limit %d, ttl %d) = %+v; want allowed=%v active=%d reset_ms=%d limit=%d now=%d, no lease id",
			now-baseMS, set.Key, token, limit, ttl, d, allowed, active, resetMS, limit, now)
	}
}

func (h *harness) release(set engine.LeaseSet, token string, released bool, active int64) {
	h.t.Helper()
	r, err := h.s.Release(h.ctx, set, token)
	if err != nil {
		h.t.Fatalf("Release(%+v, %q): %v", set, token, err)
	}
	if r.Released != released || r.Active != active {
		h.t.Errorf("at Base%+d: Release(%q, %q) = %+v; want released=%v active=%d",
			h.clock.NowMS()-baseMS, set.Key, token, r, released, active)
	}
}

func (h *harness) renew(set engine.LeaseSet, token string, ttl int64, renewed bool, active, resetMS int64) {
	h.t.Helper()
	r, err := h.s.Renew(h.ctx, set, token, ttl)
	if err != nil {
		h.t.Fatalf("Renew(%+v, %q): %v", set, token, err)
	}
	if r.Renewed != renewed || r.Active != active || r.ResetMS != resetMS {
		h.t.Errorf("at Base%+d: Renew(%q, %q, ttl %d) = %+v; want renewed=%v active=%d reset_ms=%d",
			h.clock.NowMS()-baseMS, set.Key, token, ttl, r, renewed, active, resetMS)
	}
}

func leaseTests() []subtest {
	return []subtest{
		{"LimitAndSoonestExpiry", func(h *harness) {
			s := h.set("k")
			h.at(0)
			h.acquire(s, "a", 2, 1000, yes, 1, 1000)
			h.at(100)
			h.acquire(s, "b", 2, 1000, yes, 2, 1000)
			h.acquire(s, "c", 2, 1000, no, 2, 900) // a expires at Base+1000
			h.at(999)
			h.acquire(s, "c", 2, 1000, no, 2, 1)
			h.at(1000) // a expired: its slot is free
			h.acquire(s, "c", 2, 1000, yes, 2, 1000)
			h.acquire(s, "d", 2, 1000, no, 2, 100) // b expires at Base+1100
		}},
		{"ExpiryFreesSlot", func(h *harness) {
			s := h.set("k")
			h.at(0)
			h.acquire(s, "a", 1, 300, yes, 1, 300)
			h.at(299)
			h.acquire(s, "b", 1, 300, no, 1, 1)
			h.at(300)
			h.acquire(s, "b", 1, 300, yes, 1, 300)
			h.release(s, "a", no, 1) // expired: not released
		}},
		{"Renew", func(h *harness) {
			s := h.set("k")
			h.at(0)
			h.acquire(s, "a", 3, 1000, yes, 1, 1000)
			h.at(500)
			h.renew(s, "a", 0, yes, 1, 1000) // default: its original ttl; now expires at 1500
			h.at(1400)
			h.renew(s, "a", 300, yes, 1, 300) // expires at 1700
			h.acquire(s, "b", 2, 1000, yes, 2, 1000)
			h.acquire(s, "c", 2, 1000, no, 2, 300)
			h.at(1600)
			h.renew(s, "a", 0, yes, 2, 1000) // the default stays the acquisition ttl; expires at 2600
			h.at(2400)
			h.acquire(s, "c", 2, 1000, yes, 2, 1000) // b expired at 2400
			h.at(2600)
			h.renew(s, "a", 0, no, 1, 0) // expired
			h.renew(s, "zz", 0, no, 1, 0)
			h.acquire(s, "a", 2, 1000, yes, 2, 1000)
		}},
		{"RenewKeepsExplicitTTL", func(h *harness) {
			s := h.set("k")
			h.at(0)
			h.acquire(s, "a", 1, 1000, yes, 1, 1000)
			h.renew(s, "a", 200, yes, 1, 200)
			h.at(199)
			h.acquire(s, "b", 1, 1000, no, 1, 1)
			h.at(200)
			h.renew(s, "a", 0, no, 0, 0)
			h.acquire(s, "b", 1, 1000, yes, 1, 1000)
		}},
		{"ReleaseIdempotent", func(h *harness) {
			s := h.set("k")
			h.at(0)
			h.release(s, "a", no, 0) // never used
			h.acquire(s, "a", 2, 1000, yes, 1, 1000)
			h.acquire(s, "b", 2, 1000, yes, 2, 1000)
			h.release(s, "a", yes, 1)
			h.release(s, "a", no, 1)
			h.release(s, "unknown", no, 1)
			h.acquire(s, "c", 2, 1000, yes, 2, 1000)
			h.release(s, "b", yes, 1)
			h.release(s, "c", yes, 0)
			h.release(s, "c", no, 0)
			h.renew(s, "c", 0, no, 0, 0)
		}},
		{"LoweredLimit", func(h *harness) {
			s := h.set("k")
			h.at(0)
			h.acquire(s, "a", 3, 1000, yes, 1, 1000)
			h.at(10)
			h.acquire(s, "b", 3, 1000, yes, 2, 1000)
			h.at(20)
			h.acquire(s, "c", 3, 1000, yes, 3, 1000)
			h.at(30)
			h.acquire(s, "d", 2, 1000, no, 3, 970)
			h.at(1000)
			h.acquire(s, "d", 2, 1000, no, 2, 10)
			h.at(1010)
			h.acquire(s, "d", 2, 1000, yes, 2, 1000)
		}},
		{"SetsIndependent", func(h *harness) {
			h.at(0)
			h.acquire(h.set("k1"), "a", 1, 1000, yes, 1, 1000)
			h.acquire(h.set("k2"), "a", 1, 1000, yes, 1, 1000)
			other := h.set("k1")
			other.Namespace = "ns2"
			h.acquire(other, "a", 1, 1000, yes, 1, 1000)
			h.acquire(h.set("k1"), "b", 1, 1000, no, 1, 1000)
			h.release(h.set("k2"), "a", yes, 0)
			h.acquire(h.set("k1"), "b", 1, 1000, no, 1, 1000)
		}},
	}
}
