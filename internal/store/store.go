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
