package main

import (
	"context"
	"sync"
)

// group owns goroutines that share one context: stop cancels the context and waits for
// every one of them.
type group struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newGroup returns a group with a context of its own, not derived from the signal's:
// its goroutines run until the shutdown step that stops them.
func newGroup() *group {
	ctx, cancel := context.WithCancel(context.Background())
	return &group{ctx: ctx, cancel: cancel}
}

// Go runs f on a goroutine of the group, with the group's context.
func (g *group) Go(f func(ctx context.Context)) { g.wg.Go(func() { f(g.ctx) }) }

// wait waits for the group's goroutines to end (after cancel, or on their own).
func (g *group) wait() { g.wg.Wait() }

// stop cancels the group's context and waits for its goroutines.
func (g *group) stop() {
	g.cancel()
	g.wg.Wait()
}

// cleanups undoes a failed start-up: each step pushes how to close what it opened, and run
// closes everything pushed, the last first.
type cleanups []func()

// push adds f to run on failure.
func (c *cleanups) push(f func()) { *c = append(*c, f) }

// run calls every cleanup pushed, in reverse order.
func (c cleanups) run() {
	for i := len(c) - 1; i >= 0; i-- {
		c[i]()
	}
}
