package charttest

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// dockerfile is the repository's Dockerfile, which builds the image the chart runs.
const dockerfile = "../../../Dockerfile"

// instruction is one Dockerfile instruction with its continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, USER, ...
	args string
}

// parseDockerfile reads the instructions of a Dockerfile: comments dropped, lines ending
// in a backslash joined. Enough for the checks below; not a full parser.
func parseDockerfile(t *testing.T) []instruction {
	t.Helper()
	b, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	var out []instruction
	var cur strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if s, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	return out
}

// finalStage returns the instructions of the last stage (from its FROM on).
func finalStage(ins []instruction) []instruction {
	last := 0
	for i, in := range ins {
		if in.cmd == "FROM" {
			last = i
		}
	}
	return ins[last:]
}

var numericUser = regexp.MustCompile(`^([0-9]+):([0-9]+)$`)

// imageUser returns the numeric uid and gid the image runs as. The kubelet can only
// enforce runAsNonRoot on a numeric USER (or an explicit runAsUser).
func imageUser(t *testing.T) (uid, gid int64) {
	t.Helper()
	var user string
	for _, in := range finalStage(parseDockerfile(t)) {
		if in.cmd == "USER" {
			user = in.args
		}
	}
	m := numericUser.FindStringSubmatch(user)
	if m == nil {
		t.Fatalf("Dockerfile USER %q: want a numeric uid:gid", user)
	}
	uid, _ = strconv.ParseInt(m[1], 10, 64)
	gid, _ = strconv.ParseInt(m[2], 10, 64)
	if uid == 0 || gid == 0 {
		t.Fatalf("Dockerfile USER %s runs as root", user)
	}
	return uid, gid
}

// TestDockerfile checks what the chart relies on: a static Go build, a minimal final
// image that runs `leash serve` as a non-root numeric user, and the version stamped in.
func TestDockerfile(t *testing.T) {
	ins := parseDockerfile(t)
	final := finalStage(ins)
	imageUser(t)

	var froms, runs []string
	for _, in := range ins {
		switch in.cmd {
		case "FROM":
			froms = append(froms, in.args)
		case "RUN":
			runs = append(runs, in.args)
		}
	}
	if len(froms) < 2 {
		t.Fatalf("FROM %v: want a multi-stage build", froms)
	}
	base := strings.Fields(final[0].args)[0]
	if !strings.HasPrefix(base, "gcr.io/distroless/static") && base != "scratch" {
		t.Errorf("final image %s: want distroless/static or scratch (no shell, no libc)", base)
	}
	build := strings.Join(runs, "\n")
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-X main.version=${VERSION}", "./cmd/leash"} {
		if !strings.Contains(build, want) {
			t.Errorf("the build does not use %s", want)
		}
	}
	if !slices.ContainsFunc(ins, func(in instruction) bool { return in.cmd == "ARG" && strings.HasPrefix(in.args, "VERSION") }) {
		t.Error("no ARG VERSION (make image passes --build-arg VERSION)")
	}

	var entrypoint []string
	var copied bool
	for _, in := range final {
		switch in.cmd {
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(in.args), &entrypoint); err != nil {
				t.Errorf("ENTRYPOINT %s: want the exec (JSON) form: %v", in.args, err)
			}
		case "COPY":
			copied = copied || strings.Contains(in.args, "--from=")
		case "RUN":
			t.Errorf("RUN in the final stage: %s (the minimal image has no shell)", in.args)
		}
	}
	// The chart and the examples pass only `--config FILE` arguments.
	if !slices.Equal(entrypoint, []string{"/usr/local/bin/leash", "serve"}) {
		t.Errorf("ENTRYPOINT %q, want [/usr/local/bin/leash serve]", entrypoint)
	}
	if !copied {
		t.Error("the final stage copies nothing from the build stage")
	}
	// Envoy Gateway starts its rate-limit container with the command /bin/ratelimit: the
	// image carries the same binary there (docs/envoy.md, "Leash under Envoy Gateway").
	if !slices.ContainsFunc(final, func(in instruction) bool {
		f := strings.Fields(in.args)
		return in.cmd == "COPY" && len(f) == 3 && f[0] == "--from=build" && f[1] == "/out/leash" && f[2] == "/bin/ratelimit"
	}) {
		t.Error("the final stage does not copy the leash binary to /bin/ratelimit")
	}
}

// TestDockerfileDataVolume: the image declares the disk store's directory a volume, points
// store.disk.path at it through LEASH_STORE_DISK_PATH, and hands it to the nonroot user
// (distroless has no shell to make it at run time).
func TestDockerfileDataVolume(t *testing.T) {
	final := finalStage(parseDockerfile(t))
	has := func(cmd string, match func(args string) bool) bool {
		return slices.ContainsFunc(final, func(in instruction) bool { return in.cmd == cmd && match(in.args) })
	}
	if !has("VOLUME", func(a string) bool {
		return strings.Contains(a, `"/var/lib/leash"`) || strings.TrimSpace(a) == "/var/lib/leash"
	}) {
		t.Error("the final stage declares no VOLUME /var/lib/leash")
	}
	if !has("ENV", func(a string) bool { return strings.TrimSpace(a) == "LEASH_STORE_DISK_PATH=/var/lib/leash" }) {
		t.Error("the final stage does not set LEASH_STORE_DISK_PATH=/var/lib/leash")
	}
	if !has("COPY", func(a string) bool {
		f := strings.Fields(a)
		return slices.Contains(f, "--chown=65532:65532") && len(f) > 0 && f[len(f)-1] == "/var/lib/leash"
	}) {
		t.Error("the final stage does not make /var/lib/leash the nonroot user's (COPY --chown=65532:65532 ... /var/lib/leash)")
	}
}

// TestDockerfileGoVersion keeps the build image's Go at least go.mod's go directive: the
// golang images set GOTOOLCHAIN=local, so an older one cannot build the module.
func TestDockerfileGoVersion(t *testing.T) {
	var arg string
	for _, in := range parseDockerfile(t) {
		if v, ok := strings.CutPrefix(in.args, "GO_VERSION="); ok && in.cmd == "ARG" {
			arg = v
		}
	}
	b, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go ([0-9.]+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	if arg == "" || compareVersions(arg, string(m[1])) < 0 {
		t.Errorf("Dockerfile ARG GO_VERSION=%q, below go.mod's go %s", arg, m[1])
	}
}

// compareVersions compares dotted decimal versions ("1.26" < "1.26.8").
func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(pa), len(pb)) {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}
