package memstore

// Journal receives every change of the store's durable state, so a backend can keep it
// (the disk store, spec §11.5). The store calls it under the lock that orders the change,
// after deciding and before answering, with a record key and the record's whole new
// value: replaying the records in any order, through Restore, rebuilds the state. A
// change whose Set or Commit fails is not made, and the method returns the error; a
// failed Delete (state that expired, was evicted or was swept) is ignored, so the record
// comes back at Restore no newer than it was, and Restore drops it if it is dead.
//
// Kept: counters, leases, rules, usage (daily counts, month totals, applied batch ids),
// webhooks, outbox events and once-keys, accounts and keys, and the audit log. RLQS
// demand is not: every stream reports it again within seconds (spec §14.4).
//
// Keys and values are only valid during the call.
type Journal interface {
	// Set records key's new value.
	Set(key, value []byte) error
	// Delete records that key has no value any more.
	Delete(key []byte) error
	// Batch starts a group of changes that are recorded together or not at all.
	Batch() JournalBatch
}

// JournalBatch is a group of Journal changes, recorded at Commit.
type JournalBatch interface {
	// Set adds a record's new value to the batch.
	Set(key, value []byte)
	// Delete adds a record's removal to the batch.
	Delete(key []byte)
	// Commit records the batch's changes together, then releases the batch.
	Commit() error
}

// recBufSize is the stack buffer for record keys and small values.
const recBufSize = keyBufSize + 16
