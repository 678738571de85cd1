package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/engine"
)

// errNotReplicated is returned when WaitReplicas replicas did not acknowledge a lease.
var errNotReplicated = errors.New("redisstore: lease not acknowledged by enough replicas")

var errInvalidLease = errors.New("redisstore: lease limit and time-to-live must be positive")

// Acquire takes a lease with one EVALSHA of lua/acquire.lua (followed, with WaitReplicas,
// by WAIT on the same connection, in the same round trip).
func (s *Decider) Acquire(ctx context.Context, set engine.LeaseSet, token string, limit, ttlMS int64) (engine.LeaseDecision, error) {
	if limit < 1 || ttlMS < 1 {
		return engine.LeaseDecision{}, errInvalidLease
	}
	k := s.keys.Leases(set)
	keys := []string{k[0], k[1]}
	var buf [4]int64 // the reply, without a heap allocation
	var r []int64
	var err error
	if s.waitReplicas > 0 {
		r, err = s.acquireWait(ctx, keys, []any{s.nowArg(), s.slack, token, limit, ttlMS})
	} else {
		r, err = s.runHot(ctx, s.scripts.Acquire, buf[:0], keys, strArg(s.nowArg()), intArg(s.slack), strArg(token), intArg(limit), intArg(ttlMS))
	}
	if err != nil {
		return engine.LeaseDecision{}, err
	}
	if len(r) != 4 {
		return engine.LeaseDecision{}, errors.New("redisstore: acquire: malformed script reply")
	}
	return engine.LeaseDecision{Allowed: r[0] == 1, Active: r[1], Limit: limit, ResetMS: r[2], NowMS: r[3]}, nil
}

// acquireWait runs the acquire script and WAIT in one pipeline on the connection of the
// lease set's master. When fewer than WaitReplicas replicas acknowledge within half of
// ReadTimeout, a granted lease is released again and the acquisition fails: granting a
// lease a failover could lose would let more than limit be held.
func (s *Decider) acquireWait(ctx context.Context, keys []string, args []any) ([]int64, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	ctx = s.opCtx(ctx)
	var target *redis.Client
	if s.cluster != nil {
		c, err := s.cluster.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, err
		}
		target = c
	} else {
		target = s.client.(*redis.Client)
	}
	waitTO := s.opTimeout / 2
	for try := 0; ; try++ {
		pipe := target.Pipeline()
		ev := pipe.EvalSha(ctx, s.scripts.Acquire.Hash(), keys, args...)
		w := pipe.Do(ctx, "WAIT", s.waitReplicas, waitTO.Milliseconds())
		_, _ = pipe.Exec(ctx)
		if err := ev.Err(); err != nil {
			if try == 0 && isNoScript(err) {
				if err := s.scripts.Acquire.Load(ctx, target).Err(); err != nil {
					return nil, err
				}
				continue
			}
			return nil, err
		}
		r, err := ev.Int64Slice()
		if err != nil {
			return nil, err
		}
		if len(r) == 4 && r[0] == 1 {
			if acks, err := w.Int64(); err != nil || acks < int64(s.waitReplicas) {
				token := args[2].(string)
				rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), s.opTimeout)
				_, _ = s.scripts.Release.Run(rctx, target, keys, s.nowArg(), s.slack, token).Result()
				rcancel()
				if err != nil {
					return nil, fmt.Errorf("%w: %v", errNotReplicated, err)
				}
				s.log.Warn("redis store: lease acquisition not acknowledged by enough replicas; refused",
					"wait_replicas", s.waitReplicas, "acknowledged", acks)
				return nil, errNotReplicated
			}
		}
		return r, nil
	}
}

// Release frees a lease with one EVALSHA of lua/release.lua.
func (s *Decider) Release(ctx context.Context, set engine.LeaseSet, token string) (engine.ReleaseResult, error) {
	k := s.keys.Leases(set)
	var buf [2]int64
	r, err := s.runHot(ctx, s.scripts.Release, buf[:0], []string{k[0], k[1]}, strArg(s.nowArg()), intArg(s.slack), strArg(token))
	if err != nil {
		return engine.ReleaseResult{}, err
	}
	if len(r) != 2 {
		return engine.ReleaseResult{}, errors.New("redisstore: release: malformed script reply")
	}
	return engine.ReleaseResult{Released: r[0] == 1, Active: r[1]}, nil
}

// Renew extends a held lease with one EVALSHA of lua/renew.lua.
func (s *Decider) Renew(ctx context.Context, set engine.LeaseSet, token string, ttlMS int64) (engine.RenewResult, error) {
	if ttlMS < 0 {
		return engine.RenewResult{}, errInvalidLease
	}
	k := s.keys.Leases(set)
	var buf [3]int64
	r, err := s.runHot(ctx, s.scripts.Renew, buf[:0], []string{k[0], k[1]}, strArg(s.nowArg()), intArg(s.slack), strArg(token), intArg(ttlMS))
	if err != nil {
		return engine.RenewResult{}, err
	}
	if len(r) != 3 {
		return engine.RenewResult{}, errors.New("redisstore: renew: malformed script reply")
	}
	return engine.RenewResult{Renewed: r[0] == 1, Active: r[1], ResetMS: r[2]}, nil
}
