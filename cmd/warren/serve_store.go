package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"

	"github.com/warrenhq/warren/internal/store"
	"github.com/warrenhq/warren/internal/store/postgres"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

// storeKind is one row of the store table: where Warren keeps its
// records. serve, keys and dashboard open the row --store names, so a
// store is added as a row, not as another wiring.
type storeKind struct {
	name string // as logs say it
	// schemes are the URL schemes of --store that choose this row; none =
	// the row chosen without --store.
	schemes []string
	// open opens the store of the settings: --store's URL, or the state
	// dir for the row without one.
	open func(ctx context.Context, url, stateDir string) (closingStore, error)
	// shared is set for a store several servers may share: replicas of
	// one control plane, which elect a leader (serve_replicas.go).
	shared bool
}

// closingStore is a store its opener closes.
type closingStore interface {
	store.Store
	Close() error
}

// stores is the store table, the default (no --store) first.
func stores() []storeKind {
	return []storeKind{
		{name: "SQLite", open: openSQLite},
		{name: "PostgreSQL", schemes: []string{"postgres", "postgresql"}, open: openPostgres, shared: true},
	}
}

// storeFor returns the row of --store's URL ("" = the default).
func storeFor(rawURL string) (storeKind, error) {
	all := stores()
	if rawURL == "" {
		return all[0], nil
	}
	got := "no URL"
	if u, err := url.Parse(rawURL); err == nil && u.Scheme != "" {
		for _, k := range all {
			if slices.Contains(k.schemes, u.Scheme) {
				return k, nil
			}
		}
		got = u.Scheme + "://"
	}
	// Not rawURL itself: it may hold a password.
	return storeKind{}, usageError{"--store: want a postgres:// or postgresql:// URL (postgres://user:password@host:5432/db), " +
		"or none for the SQLite file in --state-dir; got " + got}
}

// addStoreFlag defines --store, which every command that opens the store
// takes alike, so that they open the same one.
func addStoreFlag(e *envFlags, p *string) {
	e.String(p, "store", "", "where Warren keeps its records: a PostgreSQL URL (postgres://user:password@host:5432/db?sslmode=..., "+
		"for several servers sharing one database), or none for the SQLite file warren.db in --state-dir")
}

// openStore opens the store the settings name, and the close that
// undoes it. Its error names the store without its password.
func openStore(ctx context.Context, rawURL, stateDir string) (store.Store, func(), error) {
	k, err := storeFor(rawURL)
	if err != nil {
		return nil, nil, err
	}
	st, err := k.open(ctx, rawURL, stateDir)
	if err != nil {
		return nil, nil, fmt.Errorf("%s store at %s: %w", k.name, storeWhere(rawURL, stateDir), err)
	}
	return st, func() { st.Close() }, nil
}

// logStore logs which store the settings name, without its password.
func logStore(log *slog.Logger, rawURL, stateDir string) {
	if k, err := storeFor(rawURL); err == nil {
		log.Info("opening the store", "store", k.name, "at", storeWhere(rawURL, stateDir))
	}
}

// storeWhere is where the store is, as logs and errors say it: the
// SQLite file, or the URL without its password.
func storeWhere(rawURL, stateDir string) string {
	if rawURL == "" {
		return filepath.Join(stateDir, "warren.db")
	}
	return redactURL(rawURL)
}

func openSQLite(ctx context.Context, _, stateDir string) (closingStore, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	return sqlite.Open(ctx, filepath.Join(stateDir, "warren.db"))
}

func openPostgres(ctx context.Context, rawURL, _ string) (closingStore, error) {
	return postgres.Open(ctx, rawURL)
}

// redactURL is rawURL with its password, in the user info or the
// password parameter, replaced, for logs and errors.
func redactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(an unparsable URL)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
