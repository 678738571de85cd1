package ssrf

import (
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// DefaultTimeout bounds a request of a [Policy.Client] built with no timeout.
const DefaultTimeout = 10 * time.Second

// Control is for [net.Dialer].Control: it refuses a connection to an
// address that [Policy.AllowedAddr] does not allow, whatever name it was
// resolved from, and any connection that is not TCP. The error is an *Error.
func (p Policy) Control(network, address string, _ syscall.RawConn) error {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return reject("network " + network + " is not allowed")
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return reject("connection address is not an IP address")
	}
	if !p.AllowedAddr(ap.Addr()) {
		return reject("connection to an address that is not allowed")
	}
	return nil
}

// Client returns an HTTP client for deliveries under p. Its dialer refuses
// blocked addresses with [Policy.Control]; it follows no redirects (a
// redirect response is returned as is), uses no proxy, whatever the
// environment says, and bounds each request, from dialing to reading the
// body, by timeout (DefaultTimeout if timeout is not positive).
//
// The client screens addresses only: URLs must pass [Policy.CheckURL]
// first.
func (p Policy) Client(timeout time.Duration) *http.Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	dialer := &net.Dialer{
		Timeout:   timeout,
		KeepAlive: 30 * time.Second,
		Control:   p.Control,
	}
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    timeout,
		ResponseHeaderTimeout:  timeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
