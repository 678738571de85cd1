//go:build !unix

package diskstore

import (
	"fmt"
	"os"
	"path/filepath"
)

// lockName is the file in the data directory that the open Store holds.
const lockName = "leash.lock"

// lockDir creates the lock file exclusively: a leftover file from a crash must be removed
// by hand on these systems.
func lockDir(dir string) (*os.File, error) {
	name := filepath.Join(dir, lockName)
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if os.IsExist(err) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
		}
		return nil, fmt.Errorf("diskstore: create lock file %s: %w", name, err)
	}
	return f, nil
}

// unlockDir releases the lock taken by lockDir by removing its file.
func unlockDir(f *os.File) error {
	name := f.Name()
	if err := f.Close(); err != nil {
		return fmt.Errorf("diskstore: close lock file: %w", err)
	}
	return os.Remove(name)
}
