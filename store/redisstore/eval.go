package redisstore

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/store/redisstore/lua"
)

// script is one of package lua's scripts.
type script = lua.Script

// isNoScript reports Redis's answer to an EVALSHA of a script it does not have.
func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// newEvalCmd builds EVALSHA (or EVAL) of payload with newCmd (redis.NewCmd, or a typed
// reply such as redis.NewIntSliceCmd that reads integers without boxing them), routed as
// go-redis' own Eval is: by its first key.
func newEvalCmd[C redis.Cmder](ctx context.Context, newCmd func(context.Context, ...any) C, name, payload string, keys []string, args []any) C {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, payload, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	cmd := newCmd(ctx, append(a, args...)...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

// eval runs lua once: EVALSHA, and EVAL if Redis has not got the script.
func (s *conn) eval(ctx context.Context, lua *script, keys []string, args ...any) (*redis.Cmd, error) {
	return evalWith(ctx, s, redis.NewCmd, lua, keys, args)
}

// evalInts is eval for a script whose reply is an array of integers.
func (s *conn) evalInts(ctx context.Context, lua *script, keys []string, args ...any) ([]int64, error) {
	cmd, err := evalWith(ctx, s, redis.NewIntSliceCmd, lua, keys, args)
	if err != nil {
		return nil, err
	}
	return cmd.Val(), nil
}

func evalWith[C redis.Cmder](ctx context.Context, s *conn, newCmd func(context.Context, ...any) C, lua *script, keys []string, args []any) (C, error) {
	var zero C
	if s.closed.Load() {
		return zero, errClosed
	}
	cmd := newEvalCmd(ctx, newCmd, "evalsha", lua.Hash(), keys, args)
	err := s.client.Process(ctx, cmd)
	if isNoScript(err) {
		cmd = newEvalCmd(ctx, newCmd, "eval", lua.Src, keys, args)
		err = s.client.Process(ctx, cmd)
	}
	if err != nil {
		return zero, err
	}
	return cmd, nil
}
