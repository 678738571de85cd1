package hotpath

import (
	"context"
	"time"

	"github.com/leashd/leash/engine"
)

// Port is what the hot path needs of a store that can reserve (the Redis store): one
// reserve call, the fence log, and whether the store answers. Every method is one store
// operation (or, for Fence, one and a wait). The store's own Reset and overdraft Spend
// fence the slices other instances hold (spec §4.13), so any instance may make them.
type Port interface {
	// CounterKey is c's key in the store; the hot path follows counters by it.
	CounterKey(c engine.Counter) string
	// SpendKey is the store's Spend of a valid sp whose counter's key is key, made once
	// by CounterKey for both.
	SpendKey(ctx context.Context, key string, sp engine.Spend) (engine.Decision, error)
	// Reserve settles holder's last grant of the counter key (c.Ack: the seq of the grant
	// read, 0 for none; c.Used: how much of it was spent; a newer grant, whose reply was
	// not read, comes back whole), decides sp as Spend would (cost 0: nothing), and, when
	// allowed with at least c.From left, grants min(c.Want, remaining/c.Share,
	// limit/c.Part) units more, recorded as holder's grant c.Seq. A call that reaches the
	// store after its caller stopped waiting (ctx's deadline) decides and grants nothing,
	// and so does one older than holder's last grant: Reply.Verdict says so.
	Reserve(ctx context.Context, key string, sp *engine.Spend, c Call) (Reply, error)
	// Fence logs a fence on the counter key and returns once no slice of it taken before
	// can decide anywhere (every holder read the log, or has had no answer for
	// Options.Valid).
	Fence(ctx context.Context, key string) error
	// ReadFences returns the fence log after seq after (after < 0: only its last seq).
	ReadFences(ctx context.Context, after int64) (Fences, error)
	// MultiNode reports whether slices may come from several nodes (a Cluster): then
	// PingNodes tells which answer.
	MultiNode() bool
	// PingNodes pings every node and calls answered with the name (Conn.Addr) of each one
	// that answered.
	PingNodes(ctx context.Context, answered func(node string))
	// Answering reports whether the store's last call to its backend was answered.
	Answering() bool
}

// Call is what a reserve call settles and asks for, besides the request.
type Call struct {
	Holder            string // the instance: its grants are recorded under this name
	Seq               int64  // this call's seq: a holder's seqs only grow
	Ack, Used         int64  // the grant settled: its seq (0: none) and the units spent of it
	Want              int64  // units wanted; 0 grants nothing
	From, Share, Part int64  // the least left to grant, and the shares of what is left and of the limit
}

// Reply is a reserve call's answer.
type Reply struct {
	// Verdict: 1 allowed, 0 denied, -1 the call was older than the holder's last grant,
	// -2 it ran past its deadline (nothing decided in either case).
	Verdict                   int64
	Remaining, ResetMS, NowMS int64
	// Slice is the units granted; Window, Count and Prev the counter's state after the
	// request without them.
	Slice, Window, Count, Prev int64
	Others                     int64 // other holders with a grant of the counter
	Conn                       Conn  // the connection the reply came by (with a slice)
}

// Conn is a connection to one node of the store.
type Conn interface {
	// Open reports whether the connection is up.
	Open() bool
	// Addr names the node.
	Addr() string
	// AnsweredAt is when the last call the node answered on it was sent (zero: none).
	AnsweredAt() time.Time
}

// Fences is a read of the fence log.
type Fences struct {
	Last   int64    // the log's last seq
	Missed bool     // entries after the seq asked for are no longer in the log
	Keys   []string // the counters fenced after the seq asked for, oldest first
}
