package respipe

import "bufio"

// errNotInts is a well-formed reply that is not an array of integers.
const errNotInts = ReplyError("ERR leash: script reply is not an array of integers")

// readInts reads one reply that should be an array of integers into dst. An error reply
// is a ReplyError, and so is any other well-formed reply once it was read whole (the
// connection is fine); malformed input is another error (the connection is no longer
// usable).
func readInts(rd *bufio.Reader, dst []int64) ([]int64, error) {
	line, err := rd.ReadSlice('\n')
	if err != nil {
		return dst, err
	}
	if len(line) < 3 {
		return dst, ErrBadReply
	}
	switch line[0] {
	case '-':
		return dst, ReplyError(trimCRLF(line[1:]))
	case '*':
		n, ok := parseInt(line[1:])
		if !ok {
			return dst, ErrBadReply
		}
		bad := false
		for range n {
			l, err := rd.ReadSlice('\n')
			if err != nil {
				return dst, err
			}
			if len(l) > 0 && l[0] == ':' {
				v, ok := parseInt(l[1:])
				if !ok {
					return dst, ErrBadReply
				}
				dst = append(dst, v)
				continue
			}
			bad = true
			if err := skipReply(rd, l); err != nil {
				return dst, err
			}
		}
		if bad {
			return dst, errNotInts
		}
		return dst, nil
	default:
		if err := skipReply(rd, line); err != nil {
			return dst, err
		}
		return dst, errNotInts
	}
}

// skipReply reads past the rest of a reply whose first line is line.
func skipReply(rd *bufio.Reader, line []byte) error {
	if len(line) < 3 {
		return ErrBadReply
	}
	switch line[0] {
	case '+', '-', ':':
		return nil
	case '$':
		n, ok := parseInt(line[1:])
		if !ok {
			return ErrBadReply
		}
		if n < 0 {
			return nil
		}
		_, err := rd.Discard(int(n) + 2)
		return err
	case '*':
		n, ok := parseInt(line[1:])
		if !ok {
			return ErrBadReply
		}
		for range n {
			l, err := rd.ReadSlice('\n')
			if err != nil {
				return err
			}
			if err := skipReply(rd, l); err != nil {
				return err
			}
		}
		return nil
	}
	return ErrBadReply
}

// parseInt parses a RESP integer line ("-12\r\n"), without allocating.
func parseInt(b []byte) (int64, bool) {
	if len(b) < 3 || b[len(b)-2] != '\r' {
		return 0, false
	}
	b = b[:len(b)-2]
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v int64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		v = v*10 + int64(ch-'0')
	}
	if v < 0 { // 19 digits past int64
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

func trimCRLF(b []byte) string {
	if n := len(b); n >= 2 && b[n-2] == '\r' {
		return string(b[:n-2])
	}
	return string(b)
}
