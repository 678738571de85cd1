package descriptors

import "strconv"

// Error is a problem with one descriptor file.
type Error struct {
	File string // the file, as named to Load or found in a named folder; "xds:NAME" for an xDS resource
	Line int    // the YAML line the path starts at; 0 when unknown (and for xDS resources)
	Path string // where in the file, e.g. descriptors[0].rate_limit.unit; "" for the whole file
	Msg  string
}

// Error formats the error as "file:line: path: message" (without ":line" when unknown).
func (e *Error) Error() string {
	s := e.File
	if e.Line > 0 {
		s += ":" + strconv.Itoa(e.Line)
	}
	if e.Path != "" {
		if s != "" {
			s += ": "
		}
		s += e.Path
	}
	if s != "" {
		s += ": "
	}
	return s + e.Msg
}
