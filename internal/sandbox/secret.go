package sandbox

import (
	"context"
	"time"
)

// SecretIDPrefix starts every secret ID, and no secret name.
const SecretIDPrefix = "sec_"

// NewSecretID returns a random secret ID.
func NewSecretID() string { return SecretIDPrefix + randomLower() }

// Secret is a team's secret as stored: its value only sealed (encrypted
// by internal/secrets, which alone can open it). Only the current
// version's value is kept; Version counts the values it has had.
type Secret struct {
	ID        string
	TeamID    string
	Name      string // lowercase, unique in the team
	Version   int64  // 1 for a new secret, +1 at each update
	Metadata  map[string]string
	CreatedAt time.Time
	UpdatedAt time.Time
	Sealed    []byte // the current value, encrypted
}

// SecretStore keeps secrets. Methods return KindNotFound for a missing
// secret, also when it belongs to another team.
type SecretStore interface {
	// CreateSecret inserts a secret; KindConflict when its team has one
	// of that name.
	CreateSecret(ctx context.Context, s Secret) error
	// UpdateSecret replaces a secret's version, value, metadata and
	// update time, if its stored version is still prev; KindConflict
	// when another update came first.
	UpdateSecret(ctx context.Context, s Secret, prev int64) error
	GetSecret(ctx context.Context, teamID, id string) (Secret, error)
	SecretByName(ctx context.Context, teamID, name string) (Secret, error)
	// ListSecrets returns up to limit of a team's secrets, ordered by
	// name, with names after the given one ("" = from the start).
	ListSecrets(ctx context.Context, teamID, after string, limit int) ([]Secret, error)
	DeleteSecret(ctx context.Context, teamID, id string) error
}
