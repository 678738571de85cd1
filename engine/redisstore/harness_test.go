package redisstore

// The test harness: real redis-server processes on free loopback ports, each in its own
// temporary directory, stopped by PID. Nothing here ever touches a non-loopback address
// or the machine's own 127.0.0.1:6379 (unless LEASH_TEST_REDIS_URL names it).
//
// When redis-server is missing, tests skip with a loud message, except in CI (CI=true),
// where they fail: CI must never pass by skipping the Redis store.

import (
	"bufio"
	"context"
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

// requireRedis returns the path of redis-server, or skips (fails in CI) when it is missing.
func requireRedis(t testing.TB) string {
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

// requireRedisCLI returns the path of redis-cli (needed to create a cluster).
func requireRedisCLI(t testing.TB) string {
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

// server is one redis-server process (a data node or a sentinel).
type server struct {
	bin  string
	args []string
	dir  string
	port int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// addr is the server's loopback address.
func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// url is a redis:// URL for the server.
func (s *server) url() string { return "redis://" + s.addr() + "/0" }

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

// startServer starts redis-server with extra arguments on a fresh free port and waits for
// it to answer PING. The process is killed when the test ends.
func startServer(t testing.TB, bus bool, extra ...string) *server {
	t.Helper()
	bin := requireRedis(t)
	s, err := newServer(bin, bus, extra...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.destroy)
	return s
}

// newServer starts redis-server on a free port (several tries: another process may take
// the port between the check and the bind).
func newServer(bin string, bus bool, extra ...string) (*server, error) {
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
		s := &server{bin: bin, dir: dir, port: port}
		s.args = append([]string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--daemonize", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis-"+strconv.Itoa(port)+".log"),
		}, extra...)
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("redis-server did not start: %w", lastErr)
}

// destroy stops the process and removes its directory.
func (s *server) destroy() {
	s.stop()
	_ = os.RemoveAll(s.dir)
}

// start runs the process (again, after stop, on the same port) and waits for PING.
func (s *server) start() error {
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
			return fmt.Errorf("redis-server on port %d exited at start-up (see %s)", s.port, s.dir)
		default:
		}
		if pingRaw(s.addr()) == nil {
			s.cmd, s.done = cmd, done
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("redis-server on port %d did not answer PING within 10s", s.port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills the process by PID and waits for it to exit.
func (s *server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.cmd, s.done = nil, nil
}

// signal sends sig to the running process.
func (s *server) signal(sig syscall.Signal) {
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

// cluster is a 3-master Redis Cluster with no replicas.
type cluster struct {
	nodes []*server
}

func (c *cluster) addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.addr()
	}
	return out
}

// startCluster starts a 3-master cluster that is destroyed when the test ends.
func startCluster(t testing.TB) *cluster {
	t.Helper()
	bin := requireRedis(t)
	cli := requireRedisCLI(t)
	c, err := newCluster(bin, cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.destroy)
	return c
}

// newCluster starts three cluster-enabled nodes and joins them with redis-cli.
func newCluster(bin, cli string) (*cluster, error) {
	c := &cluster{}
	for range 3 {
		n, err := newServer(bin, true, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000")
		if err != nil {
			c.destroy()
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	args := append([]string{"--cluster", "create"}, c.addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	if err != nil {
		c.destroy()
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range c.nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.addr(), MaxRetries: -1})
		for {
			info, err := cl.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				_ = cl.Close()
				c.destroy()
				return nil, fmt.Errorf("cluster did not reach cluster_state:ok: %v %q", err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = cl.Close()
	}
	return c, nil
}

// destroy stops every node.
func (c *cluster) destroy() {
	for _, n := range c.nodes {
		n.destroy()
	}
}

// sentinelSet is a master, one replica and three sentinels watching them.
type sentinelSet struct {
	master, replica *server
	sentinels       []*server
	name            string
}

func (s *sentinelSet) sentinelAddrs() []string {
	out := make([]string, len(s.sentinels))
	for i, n := range s.sentinels {
		out[i] = n.addr()
	}
	return out
}

// startSentinels starts the master, its replica and three sentinels (quorum 2,
// down-after-milliseconds 1000, failover-timeout 2000).
func startSentinels(t testing.TB) *sentinelSet {
	t.Helper()
	ss := &sentinelSet{name: "leashmaster"}
	ss.master = startServer(t, false)
	ss.replica = startServer(t, false, "--replicaof", "127.0.0.1", strconv.Itoa(ss.master.port),
		"--replica-priority", "100")
	waitReplicaSynced(t, ss.replica)
	for range 3 {
		ss.sentinels = append(ss.sentinels, startSentinel(t, ss.name, ss.master.port))
	}
	// Wait until every sentinel knows the replica and the other sentinels, so a failover can start.
	deadline := time.Now().Add(20 * time.Second)
	for _, sn := range ss.sentinels {
		cl := redis.NewSentinelClient(&redis.Options{Addr: sn.addr(), MaxRetries: -1})
		for {
			m, err := cl.Master(context.Background(), ss.name).Result()
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

func waitReplicaSynced(t testing.TB, replica *server) {
	t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: replica.addr(), MaxRetries: -1})
	defer cl.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		info, err := cl.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica never synced: %v %q", err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func startSentinel(t testing.TB, name string, masterPort int) *server {
	t.Helper()
	bin := requireRedis(t)
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
		s := &server{bin: bin, dir: dir, port: port, args: []string{conf, "--sentinel"}}
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(func() { s.stop(); _ = os.RemoveAll(dir) })
			return s
		}
	}
	_ = os.RemoveAll(dir)
	t.Fatalf("redis-sentinel did not start: %v", lastErr)
	return nil
}
