package redistest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy forwards loopback TCP connections to a Redis server and can cut them in the middle
// of a reply: commands still reach Redis and run, but their callers never see the answer.
type Proxy struct {
	ln     net.Listener
	target string
	cutAt  atomic.Int64 // reply bytes still forwarded before the cut; <0: none armed
	wg     sync.WaitGroup

	mu    sync.Mutex // guards conns
	conns map[net.Conn]struct{}
}

// StartProxy listens on a free loopback port and forwards to target until the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	p.cutAt.Store(-1)
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is the proxy's redis:// URL for database 0.
func (p *Proxy) URL() string { return "redis://" + p.Addr() + "/0" }

// CutAfter makes the proxy forward n more bytes of replies (on all connections together)
// and then close every connection, both ways, dropping the rest, once; n = -1 disarms it.
func (p *Proxy) CutAfter(n int64) { p.cutAt.Store(n) }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.wg.Go(func() {
			_, _ = io.Copy(s, c)
			_ = s.Close()
		})
		p.wg.Go(func() { p.replies(c, s) })
	}
}

// track records a connection pair, or closes it when the proxy is closed.
func (p *Proxy) track(c, s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		_, _ = c.Close(), s.Close()
		return false
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	return true
}

// replies copies s's replies to c until a cut, then closes every connection.
func (p *Proxy) replies(c, s net.Conn) {
	defer func() { _, _ = c.Close(), s.Close() }()
	buf := make([]byte, 16<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			b := buf[:n]
			if left := p.cutAt.Load(); left >= 0 {
				if int64(len(b)) >= left {
					b = b[:left]
					p.cutAt.Store(-1) // once: connections made after the cut are left alone
					_, _ = c.Write(b)
					p.closeAll()
					return
				}
				p.cutAt.Add(-int64(len(b)))
			}
			if _, err := c.Write(b); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// closeAll closes every connection the proxy holds.
func (p *Proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.closeAll()
	p.mu.Lock()
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
