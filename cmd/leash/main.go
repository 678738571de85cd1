// Command leash is the Leash rate-limit and concurrency-lease service.
//
//	leash serve [--config FILE]... [--peer-env]   serve /v1, the admin listener and Envoy gRPC
//	ratelimit                        leash serve --peer-env (Envoy Gateway's command)
//	leash check-config [--config FILE]... [DESCRIPTOR_PATH]...
//	                                 check the config and descriptor files as serve would
//	leash keys new                   print a fresh API key and its SHA-256 config line
//	leash version                    print the version
//	leash limit|reset|lease|rules|stats|webhook|admin|backup ...   call the /v1 API (package cli)
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/leashd/leash/cli"
	"github.com/leashd/leash/cmd/leash/setup"
	"github.com/leashd/leash/internal/suggest"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = ""

const usageText = `usage:
  leash serve [--config FILE]... [--peer-env]
                                   start the service (no config: disk store in ./leash-data,
                                   dev account);
                                   --peer-env also reads envoyproxy/ratelimit's variables, as
                                   the same binary named ratelimit always does
  leash check-config [--config FILE]... [DESCRIPTOR_PATH]...
                                   check config and descriptor files as serve would load
                                   them (DESCRIPTOR_PATHs given replace envoy.config_paths);
                                   exit 0 valid, 1 invalid, 2 bad usage
  leash keys new                   print a new API key and the line to put in the config
  leash version                    print the version
` + cli.Usage

// The --help texts of the binary's own commands.
const (
	serveHelp = `usage:
  leash serve [--config FILE]... [--peer-env]
    start the service: /v1, the admin listener and Envoy gRPC (no config: disk store in
    ./leash-data, dev account)
flags:
  --config FILE  config file (YAML); repeat to layer files, later ones win key by key
  --peer-env     also read envoyproxy/ratelimit's environment variables, as the same
                 binary named ratelimit always does (LEASH_CONFIG names config files)
`
	checkConfigHelp = `usage:
  leash check-config [--config FILE]... [DESCRIPTOR_PATH]...
    check config and descriptor files as serve would load them, without serving or
    contacting the store; DESCRIPTOR_PATHs given replace envoy.config_paths
flags (before, between or after the paths; -- ends them):
  --config FILE  Leash config file (YAML); repeat to layer files, as for serve
exit status: 0 valid, 1 invalid (every problem on stderr), 2 bad usage
`
	keysHelp = `usage:
  leash keys new
    print a new API key and the line to put in the config
  leash keys list | create [--name NAME] | revoke KEY_ID
    the account's own API keys through the API (leash keys create --help: its flags)
`
)

func main() {
	args := os.Args[1:]
	if filepath.Base(os.Args[0]) == "ratelimit" { // the peer's command (spec §9.18)
		args = append([]string{"serve", "--peer-env"}, args...)
	}
	os.Exit(run(args, os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return 2
	}
	// leash keys new is the binary's own; leash keys list|create|revoke are the API's.
	ownKeys := args[0] == "keys" && (len(args) == 1 || args[1] == "new" || isHelp(args[1]))
	if cli.Handles(args[0]) && !ownKeys {
		return cli.Run(context.Background(), args, os.Getenv, stdout, stderr)
	}
	switch args[0] {
	case "serve":
		return runServe(args[1:], stdout, stderr)
	case "check-config":
		paths, descs, err := parseCheckArgs(args[1:], stderr)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, checkConfigHelp)
			return 0
		} else if err != nil {
			return 2
		}
		return checkConfig(paths, descs, os.Environ(), stdout, stderr)
	case "keys":
		if slices.ContainsFunc(args[1:], isHelp) {
			fmt.Fprint(stdout, keysHelp)
			return 0
		}
		if len(args) != 2 || args[1] != "new" {
			fmt.Fprint(stderr, usageText)
			return 2
		}
		key := newAPIKey()
		sum := sha256Hex(key)
		fmt.Fprintf(stdout, "api key (give it to the client; it is not stored): %s\n", key)
		fmt.Fprintf(stdout, "config line for the account:   api_key_sha256: [\"%s\"]\n", sum)
		return 0
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "leash", buildVersion())
		return 0
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usageText)
		return 0
	}
	fmt.Fprintf(stderr, "leash: unknown command %q%s\n%s", args[0], didYouMean(args[0]), usageText)
	return 2
}

// commands are the binary's first words: its own commands and the /v1 verbs.
var commands = []string{"serve", "check-config", "keys", "version", "help",
	"limit", "reset", "lease", "rules", "stats", "webhook", "admin", "backup"}

// didYouMean is `: did you mean "serve"?` for a word that nearly spells a command, else "".
func didYouMean(word string) string {
	if near := suggest.Closest(word, commands); near != "" {
		return fmt.Sprintf(": did you mean %q?", near)
	}
	return ""
}

// runServe is `leash serve [--config FILE]... [--peer-env]`.
func runServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var paths listFlag
	fs.Var(&paths, "config", "config file (YAML); repeat to layer files, later ones win key by key")
	peer := fs.Bool("peer-env", false, "also read envoyproxy/ratelimit's environment variables (spec §9.18)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, serveHelp)
		return 0
	} else if err != nil {
		fmt.Fprintf(stderr, "leash serve: %s\n", cli.FlagError(fs, err))
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "leash serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	environ := os.Environ()
	if *peer {
		pe, ok := peerEnviron(environ, stderr)
		if !ok {
			return 1
		}
		environ, paths = pe.Environ, append(pe.ConfigFiles, paths...)
	}
	return serve(paths, environ, stdout, stderr)
}

// parseCheckArgs reads check-config's arguments: --config flags and descriptor paths, in
// any order ("--" ends the flags), as the /v1 verbs read theirs (cli.ParseInterleaved).
// The error is flag.ErrHelp for -h or --help; any other is printed here, with the flag it
// nearly spells.
func parseCheckArgs(args []string, stderr io.Writer) (configs, descs []string, err error) {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var((*listFlag)(&configs), "config", "Leash config file (YAML); repeat to layer files, as for serve")
	descs, err = cli.ParseInterleaved(fs, args)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "leash check-config: %s\n", cli.FlagError(fs, err))
		}
		return nil, nil, err
	}
	return configs, descs, nil
}

// isHelp reports whether arg asks for help as the flag package reads it.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "--h", "-help", "--help":
		return true
	}
	return false
}

// checkConfig is `leash check-config` (spec §9.16): every problem on stderr, one a line.
func checkConfig(configs, descs, environ []string, stdout, stderr io.Writer) int {
	res := setup.Check(configs, descs, environ)
	if len(res.Replaced) > 0 {
		fmt.Fprintf(stderr, "leash check-config: envoy.config_paths (%s) not checked: the paths named on the command line replace them\n",
			strings.Join(res.Replaced, ", "))
	}
	if len(res.Errors) > 0 {
		for _, err := range res.Errors {
			fmt.Fprintln(stderr, err)
		}
		fmt.Fprintf(stderr, "leash check-config: invalid (%s)\n", plural(res.Problems, "problem"))
		return 1
	}
	fmt.Fprintf(stdout, "leash check-config: valid: %s, %s", plural(res.Accounts, "account"), plural(len(res.Domains), "domain"))
	if len(res.Domains) > 0 {
		fmt.Fprintf(stdout, ": %s", strings.Join(res.Domains, ", "))
	}
	fmt.Fprintln(stdout)
	return 0
}

// plural is "1 problem", "2 problems", "0 problems".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// listFlag collects a repeated string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// newAPIKey returns a random key: "lsh_" and 32 random bytes in base64url.
func newAPIKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return "lsh_" + base64.RawURLEncoding.EncodeToString(b[:])
}

func sha256Hex(key string) string {
	sum := hashKey(key)
	return hex.EncodeToString(sum[:])
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
