package redisstore

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/engine"
)

// Accounts and keys of the admin API (spec §15.2) share one hash tag, {P:a}, so every
// operation is one call of the accounts script and the whole set is read atomically with
// its version. They are not on the hot path: each instance caches them (engine) and
// polls AccountsVersion.

// accounts runs one operation of the accounts script.
func (s *AccountStore) accounts(ctx context.Context, id string, op string, args ...any) (any, error) {
	cmd, err := s.eval(s.opCtx(ctx), s.scripts.Accounts, s.keys.AccountKeys(id), append([]any{s.nowArg(), op}, args...)...)
	if err != nil {
		return nil, err
	}
	return cmd.Val(), nil
}

// parseAccount reads {plan, susp, created, keys} into an account with id.
func parseAccount(id string, v any) (engine.StoredAccount, bool, error) {
	if v == nil {
		return engine.StoredAccount{}, false, nil
	}
	f, ok := v.([]any)
	if !ok || len(f) != 4 {
		return engine.StoredAccount{}, false, fmt.Errorf("redisstore: account %q: unexpected reply %v", id, v)
	}
	plan, _ := f[0].(string)
	susp, _ := f[1].(string)
	created, err := strconv.ParseInt(fmt.Sprint(f[2]), 10, 64)
	keys, ok := f[3].(int64)
	if err != nil || !ok {
		return engine.StoredAccount{}, false, fmt.Errorf("redisstore: account %q: unexpected reply %v", id, v)
	}
	return engine.StoredAccount{ID: id, Plan: plan, Suspended: susp == "1", CreatedMS: created, Keys: int(keys)}, true, nil
}

// parseKey reads a key record '<sha256 hex>|<created>|<prefix>|<name>'.
func parseKey(account, id, rec string) (engine.StoredKey, error) {
	f := strings.SplitN(rec, "|", 4)
	k := engine.StoredKey{ID: id, Account: account}
	if len(f) != 4 {
		return k, fmt.Errorf("redisstore: key %q of %q: bad record", id, account)
	}
	if n, err := hex.Decode(k.Hash[:], []byte(f[0])); err != nil || n != len(k.Hash) {
		return k, fmt.Errorf("redisstore: key %q of %q: bad hash", id, account)
	}
	created, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return k, fmt.Errorf("redisstore: key %q of %q: bad instant", id, account)
	}
	k.CreatedMS, k.Prefix, k.Name = created, f[2], f[3]
	return k, nil
}

func replyList(v any) ([]any, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("redisstore: unexpected reply %v", v)
	}
	return l, nil
}

// CreateAccount stores a with CreatedMS from the store's clock, unless its id exists.
func (s *AccountStore) CreateAccount(ctx context.Context, a engine.StoredAccount) (engine.StoredAccount, bool, error) {
	if err := a.Validate(); err != nil {
		return engine.StoredAccount{}, false, err
	}
	v, err := s.accounts(ctx, a.ID, "create", a.ID, a.Plan)
	if err != nil {
		return engine.StoredAccount{}, false, err
	}
	l, err := replyList(v)
	if err != nil || len(l) != 2 {
		return engine.StoredAccount{}, false, fmt.Errorf("redisstore: create account: unexpected reply %v", v)
	}
	got, _, err := parseAccount(a.ID, l[1])
	return got, l[0] == int64(1), err
}

// GetAccount returns the account with id.
func (s *AccountStore) GetAccount(ctx context.Context, id string) (engine.StoredAccount, bool, error) {
	if !engine.ValidAccountID(id) {
		return engine.StoredAccount{}, false, nil
	}
	v, err := s.accounts(ctx, id, "get")
	if err != nil {
		return engine.StoredAccount{}, false, err
	}
	l, err := replyList(v)
	if err != nil || len(l) != 1 {
		return engine.StoredAccount{}, false, fmt.Errorf("redisstore: get account: unexpected reply %v", v)
	}
	return parseAccount(id, l[0])
}

// ListAccounts returns up to limit accounts with ids after after, by id.
func (s *AccountStore) ListAccounts(ctx context.Context, after string, limit int) ([]engine.StoredAccount, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit %d", engine.ErrInvalidArgument, limit)
	}
	v, err := s.accounts(ctx, "", "list", after, limit, s.keys.AccountsTag())
	if err != nil {
		return nil, err
	}
	l, err := replyList(v)
	if err != nil {
		return nil, err
	}
	return parseAccounts(l)
}

func parseAccounts(l []any) ([]engine.StoredAccount, error) {
	out := make([]engine.StoredAccount, 0, len(l)/2)
	for i := 0; i+1 < len(l); i += 2 {
		id, _ := l[i].(string)
		a, ok, err := parseAccount(id, l[i+1])
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, a)
		}
	}
	return out, nil
}

// UpdateAccount applies u to the account with id.
func (s *AccountStore) UpdateAccount(ctx context.Context, id string, u engine.AccountUpdate) (engine.StoredAccount, bool, error) {
	if !engine.ValidAccountID(id) {
		return engine.StoredAccount{}, false, nil
	}
	plan, susp := "", ""
	if u.Plan != nil {
		if !engine.ValidPlanName(*u.Plan) {
			return engine.StoredAccount{}, false, fmt.Errorf("%w: plan %q", engine.ErrInvalidArgument, *u.Plan)
		}
		plan = *u.Plan
	}
	if u.Suspended != nil {
		susp = "0"
		if *u.Suspended {
			susp = "1"
		}
	}
	v, err := s.accounts(ctx, id, "update", plan, susp)
	if err != nil {
		return engine.StoredAccount{}, false, err
	}
	l, err := replyList(v)
	if err != nil || len(l) != 1 {
		return engine.StoredAccount{}, false, fmt.Errorf("redisstore: update account: unexpected reply %v", v)
	}
	return parseAccount(id, l[0])
}

// DeleteAccount removes the account and its keys.
func (s *AccountStore) DeleteAccount(ctx context.Context, id string) (bool, error) {
	if !engine.ValidAccountID(id) {
		return false, nil
	}
	v, err := s.accounts(ctx, id, "delete", id)
	if err != nil {
		return false, err
	}
	return v == int64(1), nil
}

// IssueKey stores k with CreatedMS from the store's clock.
func (s *AccountStore) IssueKey(ctx context.Context, k engine.StoredKey) (engine.StoredKey, error) {
	if err := k.Validate(); err != nil {
		return engine.StoredKey{}, err
	}
	v, err := s.accounts(ctx, k.Account, "issue", k.ID, hex.EncodeToString(k.Hash[:]), k.Prefix, k.Name, engine.MaxKeysPerAccount)
	if err != nil {
		return engine.StoredKey{}, err
	}
	l, err := replyList(v)
	if err != nil || len(l) < 1 {
		return engine.StoredKey{}, fmt.Errorf("redisstore: issue key: unexpected reply %v", v)
	}
	switch l[0] {
	case int64(0):
		created, err := strconv.ParseInt(fmt.Sprint(l[1]), 10, 64)
		if err != nil {
			return engine.StoredKey{}, fmt.Errorf("redisstore: issue key: unexpected reply %v", v)
		}
		k.CreatedMS = created
		return k, nil
	case int64(1):
		return engine.StoredKey{}, fmt.Errorf("issue key to %q: %w", k.Account, engine.ErrNoAccount)
	case int64(2):
		return engine.StoredKey{}, fmt.Errorf("issue key to %q: %w", k.Account, engine.ErrTooManyKeys)
	default:
		return engine.StoredKey{}, fmt.Errorf("%w: key id %q exists", engine.ErrInvalidArgument, k.ID)
	}
}

// AccountKeys returns the account's keys, oldest first.
func (s *AccountStore) AccountKeys(ctx context.Context, account string) ([]engine.StoredKey, error) {
	if !engine.ValidAccountID(account) {
		return nil, nil
	}
	v, err := s.accounts(ctx, account, "keys")
	if err != nil {
		return nil, err
	}
	l, err := replyList(v)
	if err != nil {
		return nil, err
	}
	out := make([]engine.StoredKey, 0, len(l)/2)
	for i := 0; i+1 < len(l); i += 2 {
		id, _ := l[i].(string)
		rec, _ := l[i+1].(string)
		k, err := parseKey(account, id, rec)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	sortKeys(out)
	return out, nil
}

// RevokeKey removes one key of the account.
func (s *AccountStore) RevokeKey(ctx context.Context, account, keyID string) (bool, error) {
	if !engine.ValidAccountID(account) || !engine.ValidKeyID(keyID) {
		return false, nil
	}
	v, err := s.accounts(ctx, account, "revoke", keyID)
	if err != nil {
		return false, err
	}
	return v == int64(1), nil
}

// AccountsVersion returns the version every account or key write bumps.
func (s *AccountStore) AccountsVersion(ctx context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, errClosed
	}
	v, err := s.client.Get(s.opCtx(ctx), s.keys.AccountsTag()+":version").Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return v, err
}

// LoadAccounts returns every account and key, read atomically with the version.
func (s *AccountStore) LoadAccounts(ctx context.Context) (engine.AccountsSnapshot, error) {
	v, err := s.accounts(ctx, "", "load", s.keys.AccountsTag())
	if err != nil {
		return engine.AccountsSnapshot{}, err
	}
	l, err := replyList(v)
	if err != nil || len(l) != 3 {
		return engine.AccountsSnapshot{}, fmt.Errorf("redisstore: load accounts: unexpected reply %v", v)
	}
	snap := engine.AccountsSnapshot{}
	snap.Version, _ = l[0].(int64)
	accts, err := replyList(l[1])
	if err != nil {
		return engine.AccountsSnapshot{}, err
	}
	if snap.Accounts, err = parseAccounts(accts); err != nil {
		return engine.AccountsSnapshot{}, err
	}
	ks, err := replyList(l[2])
	if err != nil {
		return engine.AccountsSnapshot{}, err
	}
	for i := 0; i+2 < len(ks); i += 3 {
		account, _ := ks[i].(string)
		id, _ := ks[i+1].(string)
		rec, _ := ks[i+2].(string)
		k, err := parseKey(account, id, rec)
		if err != nil {
			return engine.AccountsSnapshot{}, err
		}
		snap.Keys = append(snap.Keys, k)
	}
	sortKeys(snap.Keys)
	return snap, nil
}

func sortKeys(ks []engine.StoredKey) {
	slices.SortFunc(ks, func(x, y engine.StoredKey) int {
		return cmp.Or(cmp.Compare(x.Account, y.Account), cmp.Compare(x.CreatedMS, y.CreatedMS), cmp.Compare(x.ID, y.ID))
	})
}
