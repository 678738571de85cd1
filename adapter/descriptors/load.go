package descriptors

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// maxFileSize bounds one descriptor file.
const maxFileSize = 4 << 20

// source is one file's name and contents.
type source struct {
	name    string
	data    []byte
	noLines bool // generated text (an xDS resource): errors name no line
}

// Load reads descriptor files and folders (see the package documentation for the folder
// rules) into a Config. The error is an *Error, or an errors.Join of up to 10 of them;
// each names a file and, when it can, the path inside it.
func Load(paths ...string) (*Config, error) {
	srcs, err := readSources(paths)
	if err != nil {
		return nil, err
	}
	c, err := build(srcs)
	if err != nil {
		return nil, err
	}
	c.fingerprint = fingerprint(srcs, nil)
	return c, nil
}

// Listed is one entry of Files: a descriptor file, or the error of a path that could not
// be listed.
type Listed struct {
	Name string
	Err  error // an *Error; Name is empty
}

// Files lists the descriptor files that paths name, in order, each once (by absolute
// path): a file path is itself; a folder gives the regular files directly inside it whose
// names end in .yaml or .yml and do not start with a dot, sorted by name (symbolic links
// followed, as in a ConfigMap). A path or folder entry that cannot be read is listed as
// its error, and listing goes on.
func Files(paths []string) []Listed {
	var out []Listed
	seen := make(map[string]bool)
	add := func(name string) {
		key := name
		if abs, err := filepath.Abs(name); err == nil {
			key = abs
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, Listed{Name: name})
		}
	}
	fail := func(name string, err error) { out = append(out, Listed{Err: &Error{File: name, Msg: ioMsg(err)}}) }
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			fail(p, err)
			continue
		}
		if !info.IsDir() {
			add(p)
			continue
		}
		ents, err := os.ReadDir(p) // sorted by name
		if err != nil {
			fail(p, err)
			continue
		}
		for _, e := range ents {
			name := e.Name()
			ext := strings.ToLower(filepath.Ext(name))
			if strings.HasPrefix(name, ".") || ext != ".yaml" && ext != ".yml" {
				continue
			}
			full := filepath.Join(p, name)
			info, err := os.Stat(full)
			if err != nil {
				fail(full, err)
			} else if info.Mode().IsRegular() {
				add(full)
			}
		}
	}
	return out
}

// readSources lists and reads the files that paths name, stopping at the first error. On
// error it also returns the files read before it, which Watch fingerprints.
func readSources(paths []string) ([]source, error) {
	var srcs []source
	for _, l := range Files(paths) {
		if l.Err != nil {
			return srcs, l.Err
		}
		data, err := readFile(l.Name)
		if err != nil {
			return srcs, err
		}
		srcs = append(srcs, source{name: l.Name, data: data})
	}
	return srcs, nil
}

func readFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, &Error{File: name, Msg: ioMsg(err)}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, &Error{File: name, Msg: ioMsg(err)}
	}
	if len(data) > maxFileSize {
		return nil, &Error{File: name, Msg: fmt.Sprintf("larger than %d MiB", maxFileSize>>20)}
	}
	return data, nil
}

// ioMsg is an I/O error's text without the file name, which the Error adds.
func ioMsg(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}

// build parses sources into a Config: the one builder of files and xDS resources alike.
func build(srcs []source) (*Config, error) {
	c := &Config{domains: make(map[string]*domain)}
	var errs []error
	for _, src := range srcs {
		d, ferrs := parseFile(src.name, src.data, src.noLines)
		if len(ferrs) > 0 {
			errs = append(errs, ferrs...)
		} else if err := c.add(d); err != nil {
			errs = append(errs, err)
		}
		c.files = append(c.files, src.name)
		if len(errs) >= maxErrors {
			break
		}
	}
	if err := joinErrors(errs); err != nil {
		return nil, err
	}
	slices.Sort(c.names)
	return c, nil
}

// add puts d into c, refusing a domain c already has.
func (c *Config) add(d *domain) error {
	if prev := c.domains[d.name]; prev != nil {
		return &Error{File: d.file, Line: d.line, Path: "domain",
			Msg: fmt.Sprintf("duplicate domain %q: %s defines it too", d.name, prev.file)}
	}
	c.domains[d.name] = d
	c.names = append(c.names, d.name)
	return nil
}

// joinErrors returns nil, the one error, or up to maxErrors of them joined.
func joinErrors(errs []error) error {
	switch {
	case len(errs) == 0:
		return nil
	case len(errs) == 1:
		return errs[0]
	}
	return errors.Join(errs[:min(len(errs), maxErrors)]...)
}

// Merge returns one Config holding the domains of every non-nil config given, refusing a
// domain that two of them define exactly as a domain in two files is refused (the error
// names the later source). It returns nil when every config is nil.
func Merge(cs ...*Config) (*Config, error) {
	var out *Config
	var errs []error
	for _, c := range cs {
		if c == nil {
			continue
		}
		if out == nil {
			out = &Config{domains: make(map[string]*domain)}
		}
		for _, name := range c.names {
			if err := out.add(c.domains[name]); err != nil {
				errs = append(errs, err)
			}
		}
		out.files = append(out.files, c.files...)
	}
	if err := joinErrors(errs); err != nil {
		return nil, err
	}
	if out != nil {
		slices.Sort(out.names)
	}
	return out, nil
}
