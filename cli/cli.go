// Package cli is the command line of Leash's /v1 API (spec §13.5): the verbs limit, reset,
// lease, rules, stats and webhook of the leash binary, built on package client. cmd/leash
// only hands them their arguments.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/leashd/leash/client"
	"github.com/leashd/leash/internal/suggest"
)

// Exit statuses (spec §13.5).
const (
	ExitOK      = 0 // success
	ExitDenied  = 1 // a denied check, a refused lease, a renewal of a lease no longer held
	ExitUsage   = 2 // bad arguments or flags
	ExitService = 3 // the service answered an error (its code is printed) or could not be reached
)

// Usage lists the verbs; cmd/leash prints it in its own usage text.
const Usage = `  leash limit NAMESPACE KEY [--algorithm A] [--limit N] [--window-ms MS] [--cost N]
  leash reset NAMESPACE KEY [--algorithm A] [--window-ms MS]
  leash lease acquire NAMESPACE KEY [--limit N] [--window-ms MS]
  leash lease release LEASE_ID
  leash lease renew LEASE_ID [--window-ms MS]
  leash rules list NAMESPACE
  leash rules set NAMESPACE --algorithm A --limit N --window-ms MS [--name NAME] [--override KEY=LIMIT[:WINDOW_MS]]...
  leash rules delete NAMESPACE rate|concurrent
  leash stats NAMESPACE            the last 30 days as a bar chart, the month against quota and hard cap
  leash webhook get | set URL | delete | test
  leash keys list                  the account's own API keys, without their secrets
  leash keys create [--name NAME]
  leash keys revoke KEY_ID
  leash admin accounts create ID --plan PLAN       (admin: an operator's key)
  leash admin accounts list [--limit N] [--cursor C]
  leash admin accounts get ID
  leash admin accounts set-plan ID PLAN
  leash admin accounts suspend ID
  leash admin accounts resume ID
  leash admin accounts delete ID
  leash admin keys issue ACCOUNT [--name NAME]
  leash admin keys list ACCOUNT
  leash admin keys revoke ACCOUNT KEY_ID
  leash audit [--limit N] [--cursor C]      the account's audit log: who changed what
  leash admin audit [--account ID] [--limit N] [--cursor C]
  leash backup DIR                 (an operator's key) copy the disk store, while it serves, into DIR
    every verb takes --url URL ($LEASH_URL, default http://localhost:8080),
    --key KEY ($LEASH_API_KEY; admin: $LEASH_OPERATOR_KEY), --json (the API's JSON instead
    of text), --timeout D (10s); flags may come before or after the arguments;
    exit 0 ok, 1 denied, 2 usage, 3 service error
`

// Handles reports whether name is one of the verbs Run serves.
func Handles(name string) bool {
	switch name {
	case "limit", "reset", "lease", "rules", "stats", "webhook", "keys", "admin", "audit", "backup":
		return true
	}
	return false
}

// Env reads an environment variable (os.Getenv in the binary).
type Env func(string) string

// Run runs one verb: args[0] is the verb, the rest its arguments and flags. It returns
// the process's exit status.
func Run(ctx context.Context, args []string, env Env, stdout, stderr io.Writer) int {
	if len(args) == 0 || !Handles(args[0]) {
		fmt.Fprint(stderr, "usage:\n"+Usage)
		return ExitUsage
	}
	cmd := &command{verb: args[0], stdout: stdout, stderr: stderr}
	rest, code, done := cmd.subverb(args[1:])
	if done {
		return code
	}
	verb := cmd.verb
	spec, ok := verbs[verb]
	if !ok {
		// "keys new" is the binary's own (cmd/leash), a near miss all the same.
		return cmd.usage("unknown command %q%s", verb, didYouMean(verb, append(slices.Clone(order), "keys new")))
	}
	fs := flag.NewFlagSet("leash "+verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	url := fs.String("url", "", "Leash base URL (default $LEASH_URL or "+client.DefaultBaseURL+")")
	keyEnv, keyWhat := "LEASH_API_KEY", "API key"
	if strings.HasPrefix(verb, "admin ") || verb == "backup" {
		keyEnv, keyWhat = "LEASH_OPERATOR_KEY", "operator key"
	}
	key := fs.String("key", "", keyWhat+" (default $"+keyEnv+")")
	fs.BoolVar(&cmd.json, "json", false, "print the API's JSON")
	defaultTimeout := 10 * time.Second
	if verb == "backup" { // a copy of a large store takes a while
		defaultTimeout = 10 * time.Minute
	}
	timeout := fs.Duration("timeout", defaultTimeout, "bound on the whole command")
	f := &flags{}
	spec.flags(fs, f)
	pos, err := ParseInterleaved(fs, rest)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, verbHelp(verb, fs))
		return ExitOK
	}
	if err != nil {
		return cmd.usage("%s", FlagError(fs, err))
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	f.opts = f.options(fs)
	if len(pos) < spec.min || len(pos) > spec.max {
		return cmd.usage("%s takes %s", verb, spec.args)
	}
	if msg := checkAlgorithm(verb, f); msg != "" {
		return cmd.usage("%s", msg)
	}
	if *url == "" {
		*url = env("LEASH_URL")
	}
	if *key == "" {
		*key = env(keyEnv)
	}
	if *key == "" { // sending it would only be refused (401), and count as a failed try
		fmt.Fprintf(stderr, "leash %s: no %s: set %s or pass --key\n", verb, keyWhat, keyEnv)
		return ExitUsage
	}
	c, err := client.New(client.Options{BaseURL: *url, APIKey: *key})
	if err != nil {
		return cmd.usage("%v", err)
	}
	cmd.c = c
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	return spec.run(ctx, cmd, pos, f)
}

// subverb reads the sub-verbs of a group (lease, rules, webhook, keys: one; admin: two)
// into c.verb and returns the arguments left; done with the exit status when it has
// answered (a group's --help, a missing sub-verb).
func (c *command) subverb(rest []string) (left []string, code int, done bool) {
	groups := 0
	switch c.verb {
	case "lease", "rules", "webhook", "keys":
		groups = 1
	case "admin":
		groups = 2 // admin accounts VERB, admin keys VERB
	}
	for range groups {
		if len(rest) > 0 && isHelp(rest[0]) {
			fmt.Fprint(c.stdout, groupHelp(c.verb))
			return nil, ExitOK, true
		}
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") {
			return nil, c.usage("%s needs a subcommand", c.verb), true
		}
		c.verb, rest = c.verb+" "+rest[0], rest[1:]
		if _, ok := verbs[c.verb]; ok {
			break // a verb of one word in its group (admin audit)
		}
	}
	return rest, 0, false
}

// didYouMean is `: did you mean "X"?` when word nearly spells one of names, else "".
func didYouMean(word string, names []string) string {
	if near := suggest.Closest(word, names); near != "" {
		return fmt.Sprintf(": did you mean %q?", near)
	}
	return ""
}

// FlagError is the message of err, an error of fs.Parse, with the flag it nearly spells
// when the flag is unknown: "flag provided but not defined: -confg (did you mean
// --config?)". cmd/leash words its own commands' flag errors with it.
func FlagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	name, unknown := strings.CutPrefix(msg, "flag provided but not defined: -")
	if !unknown {
		return msg
	}
	var names []string
	fs.VisitAll(func(fl *flag.Flag) { names = append(names, fl.Name) })
	if near := suggest.Closest(strings.TrimLeft(name, "-"), names); near != "" {
		msg += " (did you mean --" + near + "?)"
	}
	return msg
}

// checkAlgorithm is the usage error of an --algorithm the verb does not know, naming the
// one it nearly spells; "" when the flag is absent or known. rules set also takes
// concurrent_limit.
func checkAlgorithm(verb string, f *flags) string {
	if !f.set["algorithm"] {
		return ""
	}
	known := []string{client.FixedWindow, client.SlidingWindow, client.TokenBucket}
	list := "fixed_window, sliding_window or token_bucket"
	if verb == "rules set" {
		known = append(known, client.ConcurrentLimit)
		list = "fixed_window, sliding_window, token_bucket or concurrent_limit"
	}
	if slices.Contains(known, f.algorithm) {
		return ""
	}
	if near := suggest.Closest(f.algorithm, known); near != "" {
		return fmt.Sprintf("unknown algorithm %q: did you mean %s?", f.algorithm, near)
	}
	return fmt.Sprintf("unknown algorithm %q (%s)", f.algorithm, list)
}

// flags are the verbs' own flags; set records which were given.
type flags struct {
	algorithm string
	limit     int64
	windowMS  int64
	cost      int64
	name      string
	plan      string
	cursor    string
	account   string
	overrides overrideFlag
	set       map[string]bool // the flags given
	opts      []client.Option // the check and lease flags given, as client options
}

func (f *flags) options(fs *flag.FlagSet) []client.Option {
	var o []client.Option
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "algorithm":
			o = append(o, client.WithAlgorithm(f.algorithm))
		case "limit":
			o = append(o, client.WithLimit(f.limit))
		case "window-ms":
			o = append(o, client.WithWindowMS(f.windowMS))
		case "cost":
			o = append(o, client.WithCost(f.cost))
		}
	})
	return o
}

// overrideFlag collects --override KEY=LIMIT[:WINDOW_MS]; the last '=' ends the key, so a
// key may hold '=' itself (an Envoy counter key such as remote_address=10.0.0.1, spec §6.7).
type overrideFlag []client.Override

func (o *overrideFlag) String() string { return "" }
func (o *overrideFlag) Set(v string) error {
	i := strings.LastIndex(v, "=")
	if i <= 0 {
		return fmt.Errorf("want KEY=LIMIT[:WINDOW_MS], got %q", v)
	}
	k, rest := v[:i], v[i+1:]
	ls, ws, hasW := strings.Cut(rest, ":")
	limit, err := strconv.ParseInt(ls, 10, 64)
	if err != nil {
		return fmt.Errorf("override %q: limit %q is not an integer", k, ls)
	}
	ov := client.Override{Key: k, Limit: limit}
	if hasW {
		w, err := strconv.ParseInt(ws, 10, 64)
		if err != nil {
			return fmt.Errorf("override %q: window_ms %q is not an integer", k, ws)
		}
		ov.WindowMS = &w
	}
	*o = append(*o, ov)
	return nil
}

// ParseInterleaved parses fs's flags found anywhere among args, before a "--" that ends
// them; it returns the positional arguments in order, those after "--" included. The leash
// verbs and `leash check-config` read their arguments with it.
func ParseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" { // Parse ended at "--"
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// command is one run: the client and where to print.
type command struct {
	verb   string
	c      *client.Client
	json   bool
	stdout io.Writer
	stderr io.Writer
}

// usage prints a usage error and the usage lines of the verb: the sub-verb's own line,
// a group's lines (lease, rules, webhook), or every line when the verb is unknown.
func (c *command) usage(format string, a ...any) int {
	fmt.Fprintf(c.stderr, "leash: "+format+"\n", a...)
	if v, ok := verbs[c.verb]; ok {
		fmt.Fprintf(c.stderr, "usage:\n  leash %s\n  (leash %s --help: its flags; leash help: every command)\n", v.synopsis, c.verb)
		return ExitUsage
	}
	first, _, _ := strings.Cut(c.verb, " ")
	if lines := groupLines(first); len(lines) > 0 {
		fmt.Fprint(c.stderr, "usage:\n"+strings.Join(lines, "")+"  (leash help: every command and the common flags)\n")
		return ExitUsage
	}
	fmt.Fprint(c.stderr, "usage:\n"+Usage)
	return ExitUsage
}

// isHelp reports whether arg asks for help as the flag package reads it.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "--h", "-help", "--help":
		return true
	}
	return false
}

// groupLines are the usage lines of group's sub-verbs (lease, rules, webhook), in order.
func groupLines(group string) []string {
	var lines []string
	for _, name := range order {
		if strings.HasPrefix(name, group+" ") {
			lines = append(lines, "  leash "+verbs[name].synopsis+"\n")
		}
	}
	return lines
}

// groupHelp is the --help of a group of sub-verbs: their usage lines.
func groupHelp(group string) string {
	return "usage:\n" + strings.Join(groupLines(group), "") +
		"  (leash " + group + " SUBCOMMAND --help: that command and its flags)\n"
}

// verbHelp is the --help of one verb: its usage line, what it does, its flags (fs's, the
// common ones included) and the exit statuses.
func verbHelp(name string, fs *flag.FlagSet) string {
	v := verbs[name]
	var b strings.Builder
	fmt.Fprintf(&b, "usage:\n  leash %s\n    %s\nflags (before, between or after the arguments; -- ends them):\n", v.synopsis, v.about)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fs.VisitAll(func(fl *flag.Flag) {
		arg, text := flag.UnquoteUsage(fl)
		if arg != "" {
			arg = " " + arg
		}
		if d := fl.DefValue; d != "" && d != "0" && d != "false" {
			text += " (default " + d + ")"
		}
		fmt.Fprintf(tw, "  --%s%s\t%s\n", fl.Name, arg, text)
	})
	tw.Flush()
	b.WriteString("exit status: 0 ok, 1 denied, 2 usage, 3 service error\n")
	return b.String()
}

// fail prints err: a service error with its code, anything else as it is.
func (c *command) fail(err error) int {
	var e *client.Error
	switch {
	case errors.As(err, &e) && e.Code != "":
		fmt.Fprintf(c.stderr, "leash %s: %s (%d): %s\n", c.verb, e.Code, e.StatusCode, e.Message)
	case errors.As(err, &e):
		fmt.Fprintf(c.stderr, "leash %s: HTTP %d from %s\n", c.verb, e.StatusCode, c.c.BaseURL())
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(c.stderr, "leash %s: unavailable: no answer from %s in time\n", c.verb, c.c.BaseURL())
	default:
		fmt.Fprintf(c.stderr, "leash %s: unavailable: %v\n", c.verb, err)
	}
	return ExitService
}

// print writes v as JSON with --json, else the text.
func (c *command) print(v any, text string) {
	if c.json {
		enc := json.NewEncoder(c.stdout)
		enc.Encode(v)
		return
	}
	fmt.Fprint(c.stdout, text)
}

// ms formats milliseconds for people.
func ms(v int64) string { return msDuration(v).String() }

func msDuration(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
