package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// CreateDashboardLogin stores the hash of a single-use login token for
// team, valid until expires.
func (s *Store) CreateDashboardLogin(ctx context.Context, hash, teamID string, expires time.Time) error {
	if _, err := s.GetTeam(ctx, teamID); err != nil {
		return err
	}
	_, err := s.db.Exec(ctx, `INSERT INTO dashboard_logins (hash, team_id, expires_at) VALUES ($1, $2, $3)`,
		hash, teamID, unixNano(expires))
	if err != nil {
		return fmt.Errorf("create dashboard login: %w", err)
	}
	return nil
}

// UseDashboardLogin consumes the login token of hash and returns its
// team: a token is deleted by its first use (one DELETE, so two replicas
// cannot both use it), so a second use, like an unknown or expired token,
// is KindUnauthenticated. Expired tokens are deleted on the way.
func (s *Store) UseDashboardLogin(ctx context.Context, hash string, now time.Time) (string, error) {
	if _, err := s.db.Exec(ctx, `DELETE FROM dashboard_logins WHERE expires_at <= $1`, unixNano(now)); err != nil {
		return "", fmt.Errorf("expire dashboard logins: %w", err)
	}
	var team string
	err := s.db.QueryRow(ctx, `DELETE FROM dashboard_logins WHERE hash = $1 RETURNING team_id`, hash).Scan(&team)
	if errors.Is(err, sql.ErrNoRows) {
		return "", sandbox.Errorf(sandbox.KindUnauthenticated, "this login link is unknown, used or expired; run \"warren dashboard\" for a new one")
	}
	if err != nil {
		return "", fmt.Errorf("use dashboard login: %w", err)
	}
	return team, nil
}

// CreateDashboardSession stores a session, and deletes the expired
// ones, which nobody may come back to end.
func (s *Store) CreateDashboardSession(ctx context.Context, ds sandbox.DashboardSession) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM dashboard_sessions WHERE expires_at <= $1`, unixNano(ds.CreatedAt)); err != nil {
		return fmt.Errorf("expire dashboard sessions: %w", err)
	}
	_, err := s.db.Exec(ctx,
		`INSERT INTO dashboard_sessions (hash, team_id, csrf, created_at, expires_at, operator) VALUES ($1, $2, $3, $4, $5, $6)`,
		ds.Hash, ds.TeamID, ds.CSRF, unixNano(ds.CreatedAt), unixNano(ds.ExpiresAt), ds.Operator)
	if err != nil {
		return fmt.Errorf("create dashboard session: %w", err)
	}
	return nil
}

// DashboardSessionByHash returns the unexpired session of hash; an
// unknown or expired one is KindUnauthenticated (and an expired one is
// deleted).
func (s *Store) DashboardSessionByHash(ctx context.Context, hash string, now time.Time) (sandbox.DashboardSession, error) {
	ds := sandbox.DashboardSession{Hash: hash}
	var created, expires int64
	err := s.db.QueryRow(ctx, `SELECT team_id, csrf, created_at, expires_at, operator FROM dashboard_sessions WHERE hash = $1`, hash).
		Scan(&ds.TeamID, &ds.CSRF, &created, &expires, &ds.Operator)
	if errors.Is(err, sql.ErrNoRows) {
		return sandbox.DashboardSession{}, sandbox.Errorf(sandbox.KindUnauthenticated, "no dashboard session")
	}
	if err != nil {
		return sandbox.DashboardSession{}, fmt.Errorf("get dashboard session: %w", err)
	}
	ds.CreatedAt, ds.ExpiresAt = fromUnixNano(created), fromUnixNano(expires)
	if !now.Before(ds.ExpiresAt) {
		if err := s.DeleteDashboardSession(ctx, hash); err != nil {
			return sandbox.DashboardSession{}, err
		}
		return sandbox.DashboardSession{}, sandbox.Errorf(sandbox.KindUnauthenticated, "the dashboard session has expired")
	}
	return ds, nil
}

// DeleteDashboardSession ends a session; ending an unknown one is no
// error.
func (s *Store) DeleteDashboardSession(ctx context.Context, hash string) error {
	if _, err := s.db.Exec(ctx, `DELETE FROM dashboard_sessions WHERE hash = $1`, hash); err != nil {
		return fmt.Errorf("delete dashboard session: %w", err)
	}
	return nil
}
