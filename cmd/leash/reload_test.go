package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/leashproc"
)

// TestReloadLogsOneLine: one hot reload is one log line, for an edit of the config file
// and for an edit of a descriptor file (spec §10.4, §9.11).
func TestReloadLogsOneLine(t *testing.T) {
	dir := t.TempDir()
	descDir := filepath.Join(dir, "ratelimit")
	if err := os.Mkdir(descDir, 0o755); err != nil {
		t.Fatal(err)
	}
	descFile := filepath.Join(descDir, "edge.yaml")
	testkit.ReplaceFile(t, descFile, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")
	cfgFile := filepath.Join(dir, "leash.yaml")
	config := func(key string) string {
		return fmt.Sprintf("accounts:\n  - {id: acme, plan: pro, api_keys: [%s]}\nenvoy:\n  config_paths: [%s]\n  domains: {edge: {account: acme}}\n", key, descDir)
	}
	testkit.ReplaceFile(t, cfgFile, config("key-one"))
	p := leashproc.Start(t, binary, []string{"--config", cfgFile})

	// linesOf edits a file, waits until the reload's own line (msg) is logged, and returns
	// the messages of every record logged from the edit on.
	linesOf := func(edit func(), msg string) []string {
		t.Helper()
		before := len(p.Logs())
		edit()
		testkit.Eventually(t, msg+" logged", 5*time.Second, func() bool {
			for _, r := range p.Logs()[before:] {
				if r["msg"] == msg {
					return true
				}
			}
			return false
		})
		time.Sleep(300 * time.Millisecond) // room for a second line, if any
		var msgs []string
		for _, r := range p.Logs()[before:] {
			msgs = append(msgs, fmt.Sprint(r["msg"]))
		}
		return msgs
	}
	if got := linesOf(func() {
		testkit.ReplaceFile(t, descFile, "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 500}\n")
	}, "descriptors: config applied"); len(got) != 1 {
		t.Errorf("a descriptor reload logged %d lines, want 1: %q", len(got), got)
	}
	if got := linesOf(func() { testkit.ReplaceFile(t, cfgFile, config("key-two")) }, "config reloaded"); len(got) != 1 {
		t.Errorf("a config reload logged %d lines, want 1: %q", len(got), got)
	}
	p.NoCrash(t)
}
