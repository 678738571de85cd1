//go:build !race

package rls_test

// raceEnabled reports a -race build, where sync.Pool drops items at random and
// allocation counts vary.
const raceEnabled = false
