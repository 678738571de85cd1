package wire

import "encoding/json"

// Optional is a request member that may be absent: Set is false when it was not sent, or
// sent as null. With the omitzero tag option an unset Optional is not written at all.
type Optional[T any] struct {
	Value T
	Set   bool
}

// Some returns an Optional holding v.
func Some[T any](v T) Optional[T] { return Optional[T]{Value: v, Set: true} }

// SomePtr returns an Optional holding *p, or an unset one for nil.
func SomePtr[T any](p *T) Optional[T] {
	if p == nil {
		return Optional[T]{}
	}
	return Some(*p)
}

// Ptr returns a pointer to the value, or nil when unset.
func (o *Optional[T]) Ptr() *T {
	if !o.Set {
		return nil
	}
	return &o.Value
}

// IsZero reports whether the member is unset, for the omitzero tag option.
func (o Optional[T]) IsZero() bool { return !o.Set }

// MarshalJSON writes the value, or null when unset.
func (o Optional[T]) MarshalJSON() ([]byte, error) {
	if !o.Set {
		return []byte("null"), nil
	}
	return json.Marshal(o.Value)
}

// UnmarshalJSON reads the value; null leaves the member unset.
func (o *Optional[T]) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*o = Optional[T]{}
		return nil
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*o = Some(v)
	return nil
}
