// Package redistest runs real redis-server processes for tests: single nodes, Redis
// Clusters and Sentinel sets, each on free loopback ports in its own temporary directory,
// stopped by PID. Nothing here ever touches a non-loopback address or the machine's own
// 127.0.0.1:6379.
//
// When redis-server is missing, tests skip with a loud message, except in CI (CI=true),
// where they fail: CI must never pass by skipping the Redis store.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Require returns the path of redis-server, or skips (fails in CI) when it is missing.
func Require(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err == nil {
		return path
	}
	msg := "redis-server not found in PATH: Redis store tests cannot run " +
		"(install it: apt-get install -y redis-server redis-tools, or set LEASH_TEST_REDIS_URL)"
	if os.Getenv("CI") == "true" {
		t.Fatal("CI: " + msg)
	}
	t.Skip("\n\n" + strings.Repeat("!", 78) + "\n!!! SKIPPED: " + msg + "\n" + strings.Repeat("!", 78) + "\n")
	return ""
}

// RequireCLI returns the path of redis-cli (needed to create a cluster).
func RequireCLI(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath("redis-cli")
	if err == nil {
		return path
	}
	msg := "redis-cli not found in PATH: Redis Cluster tests cannot run (apt-get install -y redis-tools)"
	if os.Getenv("CI") == "true" {
		t.Fatal("CI: " + msg)
	}
	t.Skip("\n\n!!! SKIPPED: " + msg + "\n")
	return ""
}

// Server is one redis-server process (a data node or a sentinel).
type Server struct {
	// Port is the loopback port it listens on; it keeps it across Stop and Start.
	Port int

	bin  string
	args []string
	dir  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Addr is the server's loopback address.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL is a redis:// URL for the server.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// portFree reports whether a loopback TCP port can be bound right now.
func portFree(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// freePort picks a random loopback port that is free, and whose cluster bus port
// (port+10000) is free too when bus is true.
func freePort(bus bool) (int, error) {
	for range 200 {
		p := 20000 + rand.IntN(30000)
		if portFree(p) && (!bus || portFree(p+10000)) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free loopback port found")
}

// StartServer starts redis-server with extra arguments on a fresh free port and waits for
// it to answer PING. The process is killed when the test ends.
func StartServer(t testing.TB, bus bool, extra ...string) *Server {
	t.Helper()
	bin := Require(t)
	s, err := NewServer(bin, bus, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Destroy)
	return s
}

// NewServer starts redis-server on a free port (several tries: another process may take
// the port between the check and the bind).
func NewServer(bin string, bus bool, extra ...string) (*Server, error) {
	dir, err := os.MkdirTemp("", "leash-redis-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 {
		port, err := freePort(bus)
		if err != nil {
			return nil, err
		}
		s := &Server{Port: port, bin: bin, dir: dir}
		s.args = append([]string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--daemonize", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log"),
		}, extra...)
		if lastErr = s.Start(); lastErr == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("redis-server did not start: %w", lastErr)
}

// StartTLSServer starts redis-server like StartServer, also listening for TLS on a second
// free port with the given certificate and key (the certificate is its CA too; clients
// need none of their own), and returns it and the TLS port.
func StartTLSServer(t testing.TB, certFile, keyFile string, extra ...string) (*Server, int) {
	t.Helper()
	bin := Require(t)
	// The TLS port is free when picked; another process may take it before redis-server
	// binds, so a failed start picks another.
	for try := 0; ; try++ {
		tlsPort, err := freePort(false)
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewServer(bin, false, append([]string{"--tls-port", strconv.Itoa(tlsPort),
			"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", certFile,
			"--tls-auth-clients", "no"}, extra...)...)
		if err == nil {
			t.Cleanup(s.Destroy)
			return s, tlsPort
		}
		if try == 4 {
			t.Fatal(err)
		}
	}
}

// Destroy stops the process and removes its directory.
func (s *Server) Destroy() {
	s.Stop()
	_ = os.RemoveAll(s.dir)
}

// Start runs the process (again, after Stop, on the same port) and waits for PING.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("redis-server on port %d exited at start-up (see %s)", s.Port, s.dir)
		default:
		}
		if pingRaw(s.Addr()) == nil {
			s.cmd, s.done = cmd, done
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("redis-server on port %d did not answer PING within 10s", s.Port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the process by PID (SIGKILL) and waits for it to exit.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.cmd, s.done = nil, nil
}

// Signal sends sig to the running process (SIGSTOP pauses it, SIGCONT resumes it).
func (s *Server) Signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// pingRaw sends an inline PING over a plain TCP connection (no client library).
func pingRaw(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	// -NOAUTH also proves the server is up.
	if !strings.HasPrefix(line, "+PONG") && !strings.HasPrefix(line, "-NOAUTH") && !strings.HasPrefix(line, "-LOADING") {
		return fmt.Errorf("unexpected PING reply %q", line)
	}
	return nil
}

// PID is the running process's id, or 0 when it is stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// CPU is the process's user+system CPU time so far.
func (s *Server) CPU() (time.Duration, error) {
	pid := s.PID()
	if pid == 0 {
		return 0, errors.New("redistest: server is not running")
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// Fields after the command name in parentheses; utime and stime are fields 14 and 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0, errors.New("redistest: unexpected /proc/<pid>/stat")
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * (time.Second / 100), nil // USER_HZ is 100 on Linux
}

// Cluster is a Redis Cluster of 3 masters and their replicas.
type Cluster struct {
	Nodes []*Server
}

// Addrs returns every node's address (seeds for a cluster client).
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr()
	}
	return out
}

// StartCluster starts a cluster of 3 masters with replicas replicas each (node timeout
// 2 s, so a dead master fails over in a few seconds); it is destroyed when the test ends.
func StartCluster(t testing.TB, replicas int) *Cluster {
	t.Helper()
	bin := Require(t)
	cli := RequireCLI(t)
	c, err := NewCluster(bin, cli, replicas)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Destroy)
	return c
}

// NewCluster starts 3·(1+replicas) cluster-enabled nodes, joins them with redis-cli and
// waits until every node reports cluster_state:ok and knows every other.
func NewCluster(bin, cli string, replicas int) (*Cluster, error) {
	c := &Cluster{}
	for range 3 * (1 + replicas) {
		n, err := NewServer(bin, true, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000")
		if err != nil {
			c.Destroy()
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	if err != nil {
		c.Destroy()
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	want := fmt.Sprintf("cluster_known_nodes:%d", len(c.Nodes))
	for _, n := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		for {
			info, err := cl.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, want) {
				break
			}
			if time.Now().After(deadline) {
				_ = cl.Close()
				c.Destroy()
				return nil, fmt.Errorf("cluster did not reach cluster_state:ok: %v %q", err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = cl.Close()
	}
	if replicas > 0 {
		for _, n := range c.Nodes {
			if err := waitSynced(n); err != nil {
				c.Destroy()
				return nil, err
			}
		}
	}
	return c, nil
}

// MasterFor returns the node that serves key's slot now.
func (c *Cluster) MasterFor(ctx context.Context, key string) (*Server, error) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), MaxRetries: -1})
	defer cc.Close()
	m, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return nil, err
	}
	addr := m.Options().Addr
	for _, n := range c.Nodes {
		if n.Addr() == addr {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node at %s", addr)
}

// Destroy stops every node.
func (c *Cluster) Destroy() {
	for _, n := range c.Nodes {
		n.Destroy()
	}
}

// waitSynced waits until n, if it is a replica, has its link to its master up.
func waitSynced(n *Server) error {
	cl := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
	defer cl.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := cl.Info(context.Background(), "replication").Result()
		if err == nil && (strings.Contains(info, "role:master") || strings.Contains(info, "master_link_status:up")) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %s never synced: %v %q", n.Addr(), err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// SentinelSet is a master, one replica and three sentinels watching them.
type SentinelSet struct {
	Master, Replica *Server
	Sentinels       []*Server
	// Name is the master's name as the sentinels know it.
	Name string
}

// SentinelAddrs returns the sentinels' addresses.
func (s *SentinelSet) SentinelAddrs() []string {
	out := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		out[i] = n.Addr()
	}
	return out
}

// StartSentinels starts the master, its replica and three sentinels (quorum 2,
// down-after-milliseconds 1000, failover-timeout 2000); all stop when the test ends.
func StartSentinels(t testing.TB) *SentinelSet {
	t.Helper()
	ss := &SentinelSet{Name: "leashmaster"}
	ss.Master = StartServer(t, false)
	ss.Replica = StartServer(t, false, "--replicaof", "127.0.0.1", strconv.Itoa(ss.Master.Port),
		"--replica-priority", "100")
	if err := waitSynced(ss.Replica); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		ss.Sentinels = append(ss.Sentinels, startSentinel(t, ss.Name, ss.Master.Port))
	}
	// Wait until every sentinel knows the replica and the other sentinels, so a failover can start.
	deadline := time.Now().Add(20 * time.Second)
	for _, sn := range ss.Sentinels {
		cl := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr(), MaxRetries: -1})
		for {
			m, err := cl.Master(context.Background(), ss.Name).Result()
			if err == nil && m["num-other-sentinels"] == "2" && m["num-slaves"] == "1" {
				break
			}
			if time.Now().After(deadline) {
				_ = cl.Close()
				t.Fatalf("sentinels did not discover each other and the replica: %v %v", err, m)
			}
			time.Sleep(100 * time.Millisecond)
		}
		_ = cl.Close()
	}
	return ss
}

func startSentinel(t testing.TB, name string, masterPort int) *Server {
	t.Helper()
	bin := Require(t)
	dir, err := os.MkdirTemp("", "leash-sentinel-")
	if err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for range 5 {
		port, err := freePort(false)
		if err != nil {
			t.Fatal(err)
		}
		conf := filepath.Join(dir, "sentinel-"+strconv.Itoa(port)+".conf")
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
			"sentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %s 1000\n"+
			"sentinel failover-timeout %s 2000\n"+
			"sentinel parallel-syncs %s 1\n",
			port, dir, filepath.Join(dir, "sentinel.log"), name, masterPort, name, name, name)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		s := &Server{Port: port, bin: bin, dir: dir, args: []string{conf, "--sentinel"}}
		if lastErr = s.Start(); lastErr == nil {
			t.Cleanup(func() { s.Stop(); _ = os.RemoveAll(dir) })
			return s
		}
	}
	_ = os.RemoveAll(dir)
	t.Fatalf("redis-sentinel did not start: %v", lastErr)
	return nil
}
