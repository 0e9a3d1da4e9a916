package postgres

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/warrenhq/warren/internal/sandbox"
)

// A lost or refused connection is the store unavailable, with a
// Retry-After; the server refusing a statement or a login is not.
func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"shutdown", &pgconn.PgError{Severity: "FATAL", Code: "57P01"}, true},
		{"starting up", fmt.Errorf("put sandbox: %w", &pgconn.PgError{Severity: "FATAL", Code: "57P03"}), true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"closed connection", fmt.Errorf("put sandbox: %w", pgconn.ErrConnClosed), true},
		{"cut mid-answer", io.ErrUnexpectedEOF, true},
		{"refused", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"wrong password", &pgconn.PgError{Severity: "FATAL", Code: "28P01"}, false},
		{"other", errors.New("encode sandbox"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := unavailable(tc.err)
			got := sandbox.KindOf(err) == sandbox.KindUnavailable && sandbox.RetryAfter(err) > 0
			if got != tc.want || !errors.Is(err, tc.err) {
				t.Errorf("unavailable(%v) = %v (kind %v), want unavailable %v, wrapping it", tc.err, err, sandbox.KindOf(err), tc.want)
			}
		})
	}
	if unavailable(nil) != nil {
		t.Error("unavailable(nil) is not nil")
	}
}
