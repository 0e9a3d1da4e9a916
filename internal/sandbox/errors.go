package sandbox

import (
	"errors"
	"fmt"
	"time"
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
	// KindLimited is a request over a limit of its team's (a quota):
	// E2B's 429, which its SDK raises as RateLimitError.
	KindLimited
)

// Error is an error with a kind and a message safe to show to clients.
// Internal detail belongs in Err, which is logged but never shown.
type Error struct {
	Kind    Kind
	Message string
	Err     error
	// RetryAfter is when the client may try again, sent as the
	// Retry-After header; 0 = not said.
	RetryAfter time.Duration
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

// QuotaRetry is the Retry-After of a refusal over a team's quota: a
// sandbox of the team may end or pause any moment, and E2B's SDK retries
// a 429 that says when by itself (3 times by default).
const QuotaRetry = time.Second

// Limited returns a KindLimited error with msg that tells the client to
// retry after d.
func Limited(msg string, d time.Duration) error {
	return &Error{Kind: KindLimited, Message: msg, RetryAfter: d}
}

// Busy returns a KindUnavailable error with msg that tells the client to
// retry after d: the server, not the team, is full.
func Busy(msg string, d time.Duration) error {
	return &Error{Kind: KindUnavailable, Message: msg, RetryAfter: d}
}

// RetryAfter returns when err says the client may try again; 0 = it
// does not say.
func RetryAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}
