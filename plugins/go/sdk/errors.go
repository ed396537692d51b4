package wr

import "fmt"

// ErrorKind says how the host should react to a failed call.
type ErrorKind int

const (
	// Permanent: retrying the same input cannot help (e.g. an invalid spec).
	// The host sets Ready=False with the reason and waits for the parent to change.
	Permanent ErrorKind = iota
	// Transient: a later attempt may succeed (e.g. a related object is not
	// there yet). The host retries with per-object exponential backoff.
	Transient
)

// Error is the plugin's error: return it from a reconcile function. Any
// other error value is reported as a transient "PluginError" with its text.
type Error struct {
	Kind ErrorKind
	// Reason is CamelCase, shown on the parent's Ready condition.
	Reason string
	// Message is the human-readable detail.
	Message string
}

// NewPermanent returns a permanent error with a CamelCase reason.
func NewPermanent(reason, message string) *Error {
	return &Error{Kind: Permanent, Reason: reason, Message: message}
}

// NewTransient returns a transient error with a CamelCase reason.
func NewTransient(reason, message string) *Error {
	return &Error{Kind: Transient, Reason: reason, Message: message}
}

// InvalidSpec is a permanent "InvalidSpec" error naming the offending
// field: InvalidSpec("spec.replicas", "must be >= 0").
func InvalidSpec(field, problem string) *Error {
	return NewPermanent("InvalidSpec", field+": "+problem)
}

// IsPermanent reports whether the error is permanent.
func (e *Error) IsPermanent() bool { return e.Kind == Permanent }

func (e *Error) Error() string {
	kind := "permanent"
	if e.Kind == Transient {
		kind = "transient"
	}
	return fmt.Sprintf("%s error %s: %s", kind, e.Reason, e.Message)
}
