// Package devkeys keeps the SHA-256 digests of the dev keys that `leash serve` generated
// on its first start on a disk store, in a file of the store's directory, so that every
// later start on that directory accepts the keys it printed then (spec §2.4). The keys
// themselves are never written.
package devkeys

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FileName is the file in the data directory that holds the digests.
const FileName = "leash-dev-keys.json"

// Digests are the SHA-256 digests of the dev account's API key and the dev operator's
// key; a zero digest is a key not kept.
type Digests struct {
	// API is the dev account's key digest.
	API [32]byte
	// Operator is the dev operator's key digest.
	Operator [32]byte
}

// file is the JSON form of Digests, hex encoded.
type file struct {
	API      string `json:"api_key_sha256,omitempty"`
	Operator string `json:"operator_key_sha256,omitempty"`
}

// Load reads the digests kept in dir; none kept is zero Digests and no error.
func Load(dir string) (Digests, error) {
	name := filepath.Join(dir, FileName)
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return Digests{}, nil
	}
	if err != nil {
		return Digests{}, fmt.Errorf("read dev keys: %w", err)
	}
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return Digests{}, fmt.Errorf("read dev keys %s: %w", name, err)
	}
	var d Digests
	if d.API, err = parse(f.API); err != nil {
		return Digests{}, fmt.Errorf("read dev keys %s: api_key_sha256: %w", name, err)
	}
	if d.Operator, err = parse(f.Operator); err != nil {
		return Digests{}, fmt.Errorf("read dev keys %s: operator_key_sha256: %w", name, err)
	}
	return d, nil
}

// Save writes d into dir atomically (a new file renamed over the old one), synced, and
// readable by its owner only.
func Save(dir string, d Digests) error {
	f := file{API: format(d.API), Operator: format(d.Operator)}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("save dev keys: %w", err)
	}
	name := filepath.Join(dir, FileName)
	tmp, err := os.CreateTemp(dir, FileName+".*")
	if err != nil {
		return fmt.Errorf("save dev keys: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if _, err = tmp.Write(append(data, '\n')); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		return fmt.Errorf("save dev keys %s: %w", name, err)
	}
	return nil
}

// Copy copies the digests kept in dir, if any, into to (a backup of the directory).
func Copy(dir, to string) error {
	d, err := Load(dir)
	if err != nil || d == (Digests{}) {
		return err
	}
	return Save(to, d)
}

func parse(s string) (sum [32]byte, err error) {
	if s == "" {
		return sum, nil
	}
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(sum) {
		return sum, errors.New("not a SHA-256 digest in hex")
	}
	copy(sum[:], b)
	return sum, nil
}

func format(sum [32]byte) string {
	if sum == ([32]byte{}) {
		return ""
	}
	return hex.EncodeToString(sum[:])
}
