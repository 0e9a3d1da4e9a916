package sandbox

import (
	"errors"
	"fmt"
)

// Kind classifies an error for the edges: the REST API maps it to a status,
// the proxy to 502/403, the agent to a Connect code.
type Kind int

const (
	KindInternal Kind = iota
	KindNotFound
	KindConflict
	KindInvalid
	KindUnauthenticated
	KindForbidden
	KindUnavailable
)

// Error is an error with a kind and a message safe to show to clients.
// Internal detail belongs in Err, which is logged but never shown.
type Error struct {
	Kind    Kind
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error of the given kind with a formatted message.
func Errorf(kind Kind, format string, args ...any) error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error of the given kind whose cause is err.
func Wrap(kind Kind, err error, msg string) error {
	return &Error{Kind: kind, Message: msg, Err: err}
}

// KindOf returns the kind of err, KindInternal when it carries none.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}

// Message returns the client-safe message of err.
func Message(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
