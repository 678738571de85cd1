package redisstore

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/engine"
)

// ReportDemand records a stream's demand with one EVALSHA of lua/demand_report.lua.
func (s *DemandStore) ReportDemand(ctx context.Context, d engine.DemandReport) ([]engine.StreamDemand, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	k := s.keys.Demand(d.Bucket)
	cmd, err := evalWith(s.opCtx(ctx), s.conn, redis.NewSliceCmd, s.scripts.DemandReport, []string{k[0], k[1]},
		[]any{s.nowArg(), d.Stream, d.MilliRPS, d.TTLMS, engine.MaxDemandStreams})
	if err != nil {
		return nil, err
	}
	vals := cmd.Val()
	if len(vals)%3 != 0 {
		return nil, errors.New("redisstore: demand: malformed script reply")
	}
	out := make([]engine.StreamDemand, 0, len(vals)/3)
	for i := 0; i < len(vals); i += 3 {
		id, ok1 := vals[i].(string)
		rate, ok2 := vals[i+1].(int64)
		exp, ok3 := vals[i+2].(int64)
		if !ok1 || !ok2 || !ok3 {
			return nil, errors.New("redisstore: demand: malformed script reply entry " + strconv.Itoa(i/3))
		}
		out = append(out, engine.StreamDemand{Stream: id, MilliRPS: rate, ExpiresMS: exp})
	}
	slices.SortFunc(out, func(a, b engine.StreamDemand) int { return strings.Compare(a.Stream, b.Stream) })
	return out, nil
}

// DropDemand removes a stream's entry with one EVALSHA of lua/demand_drop.lua.
func (s *DemandStore) DropDemand(ctx context.Context, b engine.DemandBucket, stream string) error {
	if err := engine.ValidateDemandBucket(b, stream); err != nil {
		return err
	}
	k := s.keys.Demand(b)
	_, err := s.run(ctx, s.scripts.DemandDrop, []string{k[0], k[1]}, stream)
	return err
}
