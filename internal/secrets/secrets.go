// Package secrets owns teams' secrets: their API (create, update, get,
// list, delete by ID or name), their values sealed at rest with AES-GCM
// under the server's key, and the resolution of the placeholders network
// rules carry (${e2b.secrets.NAME}, ${e2b.identity.tokens.NAME}) for the
// egress gateway, at send time. A value leaves this package only through
// Expand, into a request the gateway sends: no API answer, log line,
// sandbox env or file carries one.
//
// It does not store (a sandbox.SecretStore does), mint tokens (a
// TokenMinter, internal/identity, does) or match requests to rules
// (internal/egress does).
package secrets

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/warrenhq/warren/internal/sandbox"
)

// Limits E2B states for secrets (SecretMetadata), and ours for values,
// which must fit in a header.
const (
	maxMetadataEntries = 32
	maxMetadataKey     = 128
	maxMetadataValue   = 1024
	maxMetadataTotal   = 8192
	maxValueSize       = 16 << 10
	// MaxListLimit is the largest page of a list, and its default.
	MaxListLimit = 100
)

// TokenMinter mints a workload token for a sandbox; internal/identity
// implements it.
type TokenMinter interface {
	Mint(ctx context.Context, audience, sandboxID, teamID string) (string, error)
}

// SandboxLookup finds a sandbox's record, for its iam.tokens; the store
// implements it.
type SandboxLookup interface {
	GetSandbox(ctx context.Context, id string) (sandbox.Sandbox, error)
}

// Config configures a Service.
type Config struct {
	Store sandbox.SecretStore // required
	// KeyFile holds the sealing key as 64 hexadecimal digits; required.
	KeyFile string
	// CreateKey makes KeyFile, with a new random key, when it is missing.
	CreateKey bool
	// Sandboxes finds sandboxes for token placeholders; nil = tokens do
	// not resolve.
	Sandboxes SandboxLookup
	// Tokens mints workload tokens; nil = tokens do not resolve.
	Tokens TokenMinter
	// Changed is told, before Create, Update or Delete return, that one
	// of team's secrets changed: whoever holds resolved values (the
	// Kubernetes engine's node gateways) takes the new ones. nil: nobody.
	Changed func(ctx context.Context, team string)
	Now     func() time.Time // nil = time.Now
}

// Service is the secrets of every team.
type Service struct {
	cfg  Config
	seal *sealer
}

// New opens (or, with CreateKey, makes) the key.
func New(cfg Config) (*Service, error) {
	key, err := loadKey(cfg.KeyFile, cfg.CreateKey)
	if err != nil {
		return nil, err
	}
	sl, err := newSealer(key)
	if err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg, seal: sl}, nil
}

// Create stores a team's new secret at version 1. Its name is kept
// lowercase.
func (s *Service) Create(ctx context.Context, team, name, value string, metadata map[string]string) (sandbox.Secret, error) {
	if err := sandbox.ValidateSecretName(name); err != nil {
		return sandbox.Secret{}, err
	}
	if err := validateValue(value); err != nil {
		return sandbox.Secret{}, err
	}
	if err := validateMetadata(metadata); err != nil {
		return sandbox.Secret{}, err
	}
	now := s.cfg.Now().UTC()
	sec := sandbox.Secret{ID: sandbox.NewSecretID(), TeamID: team, Name: strings.ToLower(name), Version: 1,
		Metadata: orEmpty(metadata), CreatedAt: now, UpdatedAt: now}
	sec.Sealed = s.seal.seal(team, sec.ID, sec.Version, value)
	if err := s.cfg.Store.CreateSecret(ctx, sec); err != nil {
		return sandbox.Secret{}, err
	}
	s.changed(ctx, team)
	return sec, nil
}

// Update stores value as the next version of a team's secret (by ID or
// name); metadata, when not nil, replaces the stored metadata.
func (s *Service) Update(ctx context.Context, team, ref, value string, metadata map[string]string) (sandbox.Secret, error) {
	if err := validateValue(value); err != nil {
		return sandbox.Secret{}, err
	}
	if err := validateMetadata(metadata); err != nil {
		return sandbox.Secret{}, err
	}
	// Two updates at once: the store takes one, the other reads the new
	// version and goes again.
	for range 8 {
		sec, err := s.Get(ctx, team, ref)
		if err != nil {
			return sandbox.Secret{}, err
		}
		prev := sec.Version
		sec.Version++
		sec.UpdatedAt = s.cfg.Now().UTC()
		if metadata != nil {
			sec.Metadata = metadata
		}
		sec.Sealed = s.seal.seal(team, sec.ID, sec.Version, value)
		err = s.cfg.Store.UpdateSecret(ctx, sec, prev)
		if sandbox.KindOf(err) == sandbox.KindConflict {
			continue
		}
		if err != nil {
			return sandbox.Secret{}, err
		}
		s.changed(ctx, team)
		return sec, nil
	}
	return sandbox.Secret{}, sandbox.Errorf(sandbox.KindConflict, "secret %q is being updated by other requests; retry", ref)
}

// Get returns a team's secret by ID (sec_…) or name, any case.
func (s *Service) Get(ctx context.Context, team, ref string) (sandbox.Secret, error) {
	lower := strings.ToLower(ref)
	var sec sandbox.Secret
	var err error
	if strings.HasPrefix(lower, sandbox.SecretIDPrefix) {
		sec, err = s.cfg.Store.GetSecret(ctx, team, lower)
	} else {
		sec, err = s.cfg.Store.SecretByName(ctx, team, lower)
	}
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return sandbox.Secret{}, sandbox.Errorf(sandbox.KindNotFound, "secret %q not found", ref)
	}
	return sec, err
}

// List returns a page of up to limit of a team's secrets (1 to
// MaxListLimit; 0 = MaxListLimit), by name, starting after the page
// token next; the returned token is "" on the last page.
func (s *Service) List(ctx context.Context, team, next string, limit int) ([]sandbox.Secret, string, error) {
	if limit == 0 {
		limit = MaxListLimit
	}
	if limit < 1 || limit > MaxListLimit {
		return nil, "", sandbox.Errorf(sandbox.KindInvalid, "limit must be between 1 and %d", MaxListLimit)
	}
	if next != "" && sandbox.ValidateSecretName(next) != nil {
		return nil, "", sandbox.Errorf(sandbox.KindInvalid, "invalid nextToken %q: pass the X-Next-Token of the previous page", next)
	}
	// One more than asked tells whether another page follows.
	list, err := s.cfg.Store.ListSecrets(ctx, team, next, limit+1)
	if err != nil {
		return nil, "", err
	}
	if len(list) <= limit {
		return list, "", nil
	}
	list = list[:limit]
	return list, list[limit-1].Name, nil
}

// Delete removes a team's secret (by ID or name) and its value. A rule
// that names it no longer resolves: requests that need it are refused.
func (s *Service) Delete(ctx context.Context, team, ref string) error {
	sec, err := s.Get(ctx, team, ref)
	if err != nil {
		return err
	}
	err = s.cfg.Store.DeleteSecret(ctx, team, sec.ID)
	if sandbox.KindOf(err) == sandbox.KindNotFound {
		return sandbox.Errorf(sandbox.KindNotFound, "secret %q not found", ref)
	}
	if err == nil {
		s.changed(ctx, team)
	}
	return err
}

func (s *Service) changed(ctx context.Context, team string) {
	if s.cfg.Changed != nil {
		s.cfg.Changed(context.WithoutCancel(ctx), team)
	}
}

// validateValue checks a secret's value: it goes into a header, so it
// must be a valid one.
func validateValue(v string) error {
	switch {
	case v == "":
		return sandbox.Errorf(sandbox.KindInvalid, "value must not be empty")
	case len(v) > maxValueSize:
		return sandbox.Errorf(sandbox.KindInvalid, "value is %d bytes; at most %d are allowed", len(v), maxValueSize)
	case !httpguts.ValidHeaderFieldValue(v):
		return sandbox.Errorf(sandbox.KindInvalid, "value contains CR, LF or another control character, which no HTTP header can carry (a trailing newline from a file?)")
	}
	return nil
}

// validateMetadata checks metadata against E2B's SecretMetadata limits.
func validateMetadata(md map[string]string) error {
	if len(md) > maxMetadataEntries {
		return sandbox.Errorf(sandbox.KindInvalid, "metadata has %d entries; at most %d are allowed", len(md), maxMetadataEntries)
	}
	total := 0
	for k, v := range md {
		if k == "" || len(k) > maxMetadataKey || !utf8.ValidString(k) {
			return sandbox.Errorf(sandbox.KindInvalid, "metadata key %q must be 1 to %d bytes of UTF-8", k, maxMetadataKey)
		}
		if len(v) > maxMetadataValue || !utf8.ValidString(v) {
			return sandbox.Errorf(sandbox.KindInvalid, "the metadata value of %q must be at most %d bytes of UTF-8", k, maxMetadataValue)
		}
		total += len(k) + len(v)
	}
	if total > maxMetadataTotal {
		return sandbox.Errorf(sandbox.KindInvalid, "metadata is %d bytes; at most %d are allowed", total, maxMetadataTotal)
	}
	return nil
}

func orEmpty(md map[string]string) map[string]string {
	if md == nil {
		return map[string]string{}
	}
	return md
}
