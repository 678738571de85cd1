package engine

// The values of the account-wide reads (spec §15.5): every namespace's rules and usage,
// and the leases held on one key.

// NamespaceRules is how many rules (1 or 2) one namespace of an account has.
type NamespaceRules struct {
	Namespace string
	Rules     int
}

// NamespaceUsage is one namespace's usage on one day.
type NamespaceUsage struct {
	Namespace string
	Day       Day
	UsageCount
}

// AccountUsageQuery asks for every namespace's usage of an account from FirstDay to
// LastDay, and the account's total in Month.
type AccountUsageQuery struct {
	Account  string
	FirstDay Day // inclusive
	LastDay  Day // inclusive
	Month    Month
}

// AccountUsageReport answers an AccountUsageQuery.
type AccountUsageReport struct {
	// Entries are the days and namespaces with usage, by day then namespace (bytewise).
	Entries []NamespaceUsage
	// MonthTotal is the account's total over all namespaces in the queried month.
	MonthTotal int64
}

// HeldLease is one lease of a lease set.
type HeldLease struct {
	Token     string
	ExpiresMS int64 // Unix ms, by the store's clock
}

// HeldLeases are a lease set's unexpired leases, soonest expiry first (ties by token), with
// the store's clock when they were read.
type HeldLeases struct {
	Leases []HeldLease
	NowMS  int64
}
