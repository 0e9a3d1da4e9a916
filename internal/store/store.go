// Package store says what a Warren store is: the one interface its users
// (cmd/warren, internal/server) take, whichever adapter keeps the records.
// The adapters are its subpackages, each named after what it stores in:
// sqlite (one file, the default on one machine) and postgres (a server
// several control-plane replicas share), whose queries are written once in
// sqlstore; storetest is the conformance suite both pass. It opens
// nothing: cmd/warren chooses and opens the adapter.
package store

import (
	"context"
	"time"

	"github.com/warrenhq/warren/internal/events"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/template"
)

// Store is everything a Warren store implements: the records of the
// lifecycle manager, secrets, volumes, events, templates and the
// dashboard.
type Store interface {
	sandbox.Store
	sandbox.SecretStore
	sandbox.VolumeStore
	events.Store
	template.Store

	// The dashboard's (internal/web.Store).
	ListTeamAPIKeys(ctx context.Context, teamID string) ([]sandbox.APIKey, error)
	CreateDashboardLogin(ctx context.Context, hash, teamID string, expires time.Time) error
	UseDashboardLogin(ctx context.Context, hash string, now time.Time) (string, error)
	CreateDashboardSession(ctx context.Context, ds sandbox.DashboardSession) error
	DashboardSessionByHash(ctx context.Context, hash string, now time.Time) (sandbox.DashboardSession, error)
	DeleteDashboardSession(ctx context.Context, hash string) error
}

// CallAnswers keeps the answers of calls a control-plane replica forwarded
// to its leader, by a key the forwarding replica gave the call, so that a
// call sent again to a new leader (the first was lost during it) is
// answered as it was the first time instead of done twice. A store that
// replicas share implements it (postgres); without it a call is never
// replayed.
type CallAnswers interface {
	// CallAnswer returns the answer kept for key; false when none is.
	CallAnswer(ctx context.Context, key string) (CallAnswer, bool, error)
	// SaveCallAnswer keeps a's answer under key, unless one is kept
	// already, for CallAnswerKept.
	SaveCallAnswer(ctx context.Context, key string, a CallAnswer) error
}

// CallAnswer is a forwarded call's answer as its client got it.
type CallAnswer struct {
	Status      int
	ContentType string
	Body        []byte
}

// CallAnswerKept is how long a call's answer is kept: far longer than a
// forwarding replica goes on sending the call again (internal/server's
// leader wait).
const CallAnswerKept = time.Hour

// SharedFiles keeps the files of a server's state dir that control-plane
// replicas must hold alike (internal/server), sealed by their caller. A
// store that replicas share implements it (postgres).
type SharedFiles interface {
	// SharedFile returns the sealed file kept under name; false when
	// none is.
	SharedFile(ctx context.Context, name string) ([]byte, bool, error)
	// ShareFile keeps sealed under name unless a file is kept there
	// already (another replica's), and returns the one kept.
	ShareFile(ctx context.Context, name string, sealed []byte) ([]byte, error)
	// SwapSharedFile keeps next under name in place of old (nil: none
	// kept), unless another replica changed it first, and returns the
	// one kept after: next, or theirs.
	SwapSharedFile(ctx context.Context, name string, old, next []byte) ([]byte, error)
	// LockSharedFiles waits until no other replica holds the files' lock,
	// and takes it until unlock: replicas starting together take turns
	// to load or make the files and share them.
	LockSharedFiles(ctx context.Context) (unlock func(), err error)
}
