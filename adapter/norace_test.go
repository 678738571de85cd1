//go:build !race

package adapter_test

// raceEnabled reports a -race build, where sync.Pool drops items at random and
// allocation counts vary.
const raceEnabled = false
