package engine

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Bounds of accounts and keys made through the admin API (spec §15.3).
const (
	// MaxKeysPerAccount is the most API keys one account may hold in the store.
	MaxKeysPerAccount = 100
	// MaxKeyName is the longest key name, in characters.
	MaxKeyName = 64
	// MaxAccountsPage is the largest page GET /v1/admin/accounts answers.
	MaxAccountsPage = 1000
)

// StoredAccount is an account created through the admin API, as the store keeps it
// (spec §15). Its plan is a name, resolved against the configured plans when it is served.
type StoredAccount struct {
	ID        string
	Plan      string
	Suspended bool
	// CreatedMS is when it was created, by the store's clock (set by CreateAccount).
	CreatedMS int64
	// Keys is how many keys the account holds: set by the reads, ignored by the writes.
	Keys int
}

// StoredKey is an API key issued through the admin API: the store keeps its SHA-256,
// never the key itself.
type StoredKey struct {
	ID      string
	Account string
	Name    string
	// Prefix is the key's first characters, shown to tell keys apart.
	Prefix string
	Hash   [32]byte
	// CreatedMS is when it was issued, by the store's clock (set by IssueKey).
	CreatedMS int64
}

// AccountUpdate changes a stored account; nil fields are left as they are.
type AccountUpdate struct {
	Plan      *string
	Suspended *bool
}

// AccountsSnapshot is every stored account and key, read atomically at one version.
type AccountsSnapshot struct {
	Version  int64
	Accounts []StoredAccount // by id, bytewise
	Keys     []StoredKey     // by account, then created, then id
}

// Errors of an AccountStore.
var (
	// ErrNoAccount: IssueKey for an account the store does not hold.
	ErrNoAccount = errors.New("no such account")
	// ErrTooManyKeys: IssueKey for an account that already holds MaxKeysPerAccount keys.
	ErrTooManyKeys = errors.New("account holds the most keys allowed")
)

// AccountStore keeps the accounts and API keys made through the admin API (spec §15.2).
// Every method is one atomic operation and reads its instants from the store's clock.
// Every write bumps a version that AccountsVersion reads, so each instance can cache the
// whole set and reload it only when it changed. Methods reject out-of-range arguments (see
// StoredAccount.Validate and StoredKey.Validate) with an error wrapping
// ErrInvalidArgument, changing nothing.
type AccountStore interface {
	// CreateAccount stores a with CreatedMS set to now; created is false, and nothing
	// changes, when an account with that id exists (its record is returned).
	CreateAccount(ctx context.Context, a StoredAccount) (got StoredAccount, created bool, err error)
	// GetAccount returns the account with id.
	GetAccount(ctx context.Context, id string) (a StoredAccount, ok bool, err error)
	// ListAccounts returns up to limit accounts whose ids sort bytewise after after ("" is
	// before every id), in that order.
	ListAccounts(ctx context.Context, after string, limit int) ([]StoredAccount, error)
	// UpdateAccount applies u to the account with id and returns it; ok is false when
	// there is none.
	UpdateAccount(ctx context.Context, id string, u AccountUpdate) (a StoredAccount, ok bool, err error)
	// DeleteAccount removes the account and all its keys; deleted reports whether it existed.
	DeleteAccount(ctx context.Context, id string) (deleted bool, err error)
	// IssueKey stores k (its ID unique within the account) with CreatedMS set to now. An
	// account the store does not hold is ErrNoAccount, one holding MaxKeysPerAccount
	// keys is ErrTooManyKeys (both wrapped; nothing changes).
	IssueKey(ctx context.Context, k StoredKey) (StoredKey, error)
	// AccountKeys returns the account's keys, oldest first (ties by id).
	AccountKeys(ctx context.Context, account string) ([]StoredKey, error)
	// RevokeKey removes one key of the account; revoked reports whether it existed.
	RevokeKey(ctx context.Context, account, keyID string) (revoked bool, err error)
	// AccountsVersion returns the version every write above bumps (0 before any write).
	AccountsVersion(ctx context.Context) (int64, error)
	// LoadAccounts returns every account and key with the version they were read at.
	LoadAccounts(ctx context.Context) (AccountsSnapshot, error)
}

// Validate checks an account record: a valid id and plan name (spec §2.1, §2.3). The
// error wraps ErrInvalidArgument.
func (a *StoredAccount) Validate() error {
	if !ValidAccountID(a.ID) {
		return fmt.Errorf("%w: account id %q", ErrInvalidArgument, a.ID)
	}
	if !ValidPlanName(a.Plan) {
		return fmt.Errorf("%w: plan %q", ErrInvalidArgument, a.Plan)
	}
	return nil
}

// Validate checks a key record: a valid account id, a key id of 1 to 64 bytes of
// [A-Za-z0-9_-], a name of at most MaxKeyName characters and a prefix of at most 64
// bytes, neither with control characters. The error wraps ErrInvalidArgument.
func (k *StoredKey) Validate() error {
	if !ValidAccountID(k.Account) {
		return fmt.Errorf("%w: account id %q", ErrInvalidArgument, k.Account)
	}
	if !ValidKeyID(k.ID) {
		return fmt.Errorf("%w: key id %q", ErrInvalidArgument, k.ID)
	}
	if err := CheckKeyName(k.Name); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	if len(k.Prefix) > 64 || hasControl(k.Prefix) {
		return fmt.Errorf("%w: key prefix", ErrInvalidArgument)
	}
	return nil
}

// ValidPlanName reports whether name matches [a-z0-9][a-z0-9_-]{0,63} (spec §2.3).
func ValidPlanName(name string) bool { return accountIDPattern.MatchString(name) }

// ValidKeyID reports whether id is 1 to 64 bytes of [A-Za-z0-9_-].
func ValidKeyID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// CheckKeyName checks a key's name: valid UTF-8 of at most MaxKeyName characters with no
// control characters (spec §15.3).
func CheckKeyName(name string) error {
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > MaxKeyName || hasControl(name) {
		return Invalid("name must be at most 64 characters of valid UTF-8 without control characters")
	}
	if HasBidiControl(name) {
		return Invalid(MsgBidi)
	}
	return nil
}

// MsgBidi refuses a name with a bidirectional control.
const MsgBidi = "name must not contain Unicode bidirectional controls (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069)"

// HasBidiControl reports whether s holds a Unicode bidirectional control character, which
// can make a name read as another where people see it (spec §3.4).
func HasBidiControl(s string) bool {
	for _, r := range s {
		switch {
		case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return true
		}
	}
	return false
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			return true
		}
	}
	return false
}
