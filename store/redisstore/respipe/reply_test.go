package respipe

import (
	"bufio"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestReadInts: the reply reader takes arrays of integers, reports error replies and
// anything else as reply errors (the connection stays usable: the reply was read whole),
// and malformed input as a broken connection.
func TestReadInts(t *testing.T) {
	for _, tc := range []struct {
		in     string
		want   []int64
		reply  string // a ReplyError with this prefix
		broken bool   // an error that is not a ReplyError
		rest   string // what must be left unread
	}{
		{in: "*3\r\n:1\r\n:-20\r\n:9223372036854775807\r\n+next\r\n", want: []int64{1, -20, 9223372036854775807}, rest: "+next\r\n"},
		{in: "*0\r\n", want: []int64{}},
		{in: "-NOSCRIPT No matching script\r\n:1\r\n", reply: "NOSCRIPT", rest: ":1\r\n"},
		{in: "$3\r\nabc\r\n+next\r\n", reply: "ERR leash", rest: "+next\r\n"},
		{in: "*2\r\n:1\r\n$-1\r\n+next\r\n", reply: "ERR leash", rest: "+next\r\n"},
		{in: "*2\r\n*1\r\n:1\r\n:2\r\n+next\r\n", reply: "ERR leash", rest: "+next\r\n"},
		{in: ":5\r\n+next\r\n", reply: "ERR leash", rest: "+next\r\n"},
		{in: "*1\r\n:99999999999999999999\r\n", broken: true},
		{in: "*x\r\n", broken: true},
		{in: "*2\r\n:1\r\n", broken: true},
		{in: "?\r\n", broken: true},
		{in: "", broken: true},
	} {
		rd := bufio.NewReader(strings.NewReader(tc.in))
		got, err := readInts(rd, nil)
		var re ReplyError
		isReply := errors.As(err, &re)
		switch {
		case tc.broken:
			if err == nil || isReply {
				t.Errorf("%q: err %v, want a broken connection", tc.in, err)
			}
			continue
		case tc.reply != "":
			if !isReply || !strings.HasPrefix(string(re), tc.reply) {
				t.Errorf("%q: err %v, want reply error %s", tc.in, err, tc.reply)
			}
		default:
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
			}
		}
		rest := make([]byte, 64)
		n, _ := rd.Read(rest)
		if string(rest[:n]) != tc.rest {
			t.Errorf("%q: left %q unread, want %q", tc.in, rest[:n], tc.rest)
		}
	}
}

// TestNotRunHere: the error replies of a command that did not run on the node are told
// apart from every other error, which may mean it ran.
func TestNotRunHere(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{ReplyError("NOSCRIPT No matching script. Please use EVAL."), true},
		{ReplyError("MOVED 3999 127.0.0.1:6381"), true},
		{ReplyError("ASK 3999 127.0.0.1:6381"), true},
		{ReplyError("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{ReplyError("CLUSTERDOWN The cluster is down"), true},
		{ReplyError("READONLY You can't write against a read only replica."), true},
		{ReplyError("LOADING Redis is loading the dataset in memory"), true},
		{ReplyError("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), true},
		{ReplyError("ERR Error running script"), false},
		{ReplyError("BUSY Redis is busy running a script"), false},
		{errNotInts, false},
		{ErrDown, false},
		{ErrTimeout, false},
		{fmt.Errorf("wrapped: %w", ReplyError("NOSCRIPT x")), false}, // only a reply as Do returns it
		{nil, false},
	} {
		if got := NotRunHere(tc.err); got != tc.want {
			t.Errorf("NotRunHere(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if c := ReplyError("READONLY You can't write").Code(); c != "READONLY" {
		t.Errorf("Code() = %q", c)
	}
	if c := ReplyError("ERR").Code(); c != "ERR" {
		t.Errorf("Code() = %q", c)
	}
}
