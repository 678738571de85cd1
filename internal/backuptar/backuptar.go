// Package backuptar carries a disk store's backup, a directory of plain files, as a tar
// stream: the server writes the checkpoint it made, `leash backup` unpacks it (spec
// §11.5).
package backuptar

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Write writes every regular file of dir, the top level only (a checkpoint has no
// folders), into w as a tar stream, and ends it.
func Write(w io.Writer, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("backup tar: %w", err)
	}
	tw := tar.NewWriter(w)
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return fmt.Errorf("backup tar: %s is not a regular file", filepath.Join(dir, e.Name()))
		}
		if err := addFile(tw, filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("backup tar: %w", err)
	}
	return nil
}

// addFile writes one file's header and contents.
func addFile(tw *tar.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("backup tar: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("backup tar: %w", err)
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: info.Name(), Size: info.Size(), Mode: 0o600, ModTime: info.ModTime()}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("backup tar: %s: %w", path, err)
	}
	if _, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("backup tar: %s: %w", path, err)
	}
	return nil
}

// Extract creates dir, which must not exist, and writes into it the files of the tar
// stream r; a stream that names anything but plain files at its top level is refused.
// Every file is synced, and so is dir, before it returns.
func Extract(r io.Reader, dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("backup: %s already exists: name a new directory", dir)
		}
		return fmt.Errorf("backup: %w", err)
	}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("backup: read the stream: %w", err)
		}
		name := hdr.Name
		if hdr.Typeflag != tar.TypeReg || name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") {
			return fmt.Errorf("backup: the stream holds %q, not a plain file", name)
		}
		if err := writeFile(filepath.Join(dir, name), tr); err != nil {
			return err
		}
	}
	return syncDir(dir)
}

// writeFile writes r into a new file at path and syncs it.
func writeFile(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("backup: write %s: %w", path, err)
	}
	return nil
}

// syncDir syncs dir's entries.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("backup: sync %s: %w", dir, err)
	}
	return nil
}
