package httpedge

import (
	"context"
	"crypto/subtle"

	"github.com/warrenhq/warren/internal/sandbox"
)

// KeyStore finds a stored API key by its hash; the store implements it.
type KeyStore interface {
	APIKeyByHash(ctx context.Context, hash string) (sandbox.APIKey, error)
}

// Keys finds the team of an API key, for the control plane's X-API-KEY
// and the dashboard's login with a key alike.
type Keys struct {
	store KeyStore
	extra [][]byte // hashes of the extra keys
}

// NewKeys looks keys up in store; extra are accepted besides the stored
// ones, for the default team (WARREN_API_KEY).
func NewKeys(store KeyStore, extra []string) *Keys {
	k := &Keys{store: store}
	for _, key := range extra {
		k.extra = append(k.extra, []byte(sandbox.HashAPIKey(key)))
	}
	return k
}

// Team returns the team of key; a key that is malformed or unknown is
// KindUnauthenticated.
func (k *Keys) Team(ctx context.Context, key string) (string, error) {
	if !sandbox.ValidAPIKey(key) {
		return "", sandbox.Errorf(sandbox.KindUnauthenticated, "invalid API key")
	}
	hash := []byte(sandbox.HashAPIKey(key))
	for _, h := range k.extra {
		if subtle.ConstantTimeCompare(h, hash) == 1 {
			return sandbox.DefaultTeamID, nil
		}
	}
	stored, err := k.store.APIKeyByHash(ctx, string(hash))
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return "", sandbox.Errorf(sandbox.KindUnauthenticated, "invalid API key")
	}
	if err != nil {
		return "", err
	}
	return stored.TeamID, nil
}
