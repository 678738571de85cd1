package descriptors

// Error is a problem with one descriptor file.
type Error struct {
	File string // the file, as named to Load or found in a named folder
	Path string // where in the file, e.g. descriptors[0].rate_limit.unit; "" for the whole file
	Msg  string
}

// Error formats the error as "file: path: message".
func (e *Error) Error() string {
	s := e.File
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
