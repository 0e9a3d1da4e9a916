package sandbox

import (
	"context"
	"time"
)

// Team owns sandboxes, snapshots and API keys. A key sees only its team's.
type Team struct {
	ID        string
	Name      string
	CreatedAt time.Time
	// Quota is the operator's limits for the team (SetTeamQuota); PutTeam
	// leaves a team's quota as it is. Zero = the server's defaults.
	Quota Quota
}

// DefaultTeamID is the team created with every store; keys made without a
// team, and the key from WARREN_API_KEY, belong to it.
const DefaultTeamID = "default"

// APIKey is an API key as stored: only the hash of the key is kept.
type APIKey struct {
	ID        string
	TeamID    string
	Name      string
	Hash      string // HashAPIKey of the key
	Mask      string // the key's first and last characters, for listings
	CreatedAt time.Time
}

// DashboardSession is a dashboard login as stored (internal/web): only
// the hash of its cookie's token is kept, with the CSRF token its
// state-changing requests must carry.
type DashboardSession struct {
	Hash      string
	TeamID    string
	CSRF      string
	CreatedAt time.Time
	ExpiresAt time.Time
	// Operator is true for a session made from a login link of `warren
	// dashboard`, which needs the state dir: the server's operator, who
	// may see server-wide figures. An API key's session is only its team's.
	Operator bool
}

// Snapshot is a sandbox's filesystem saved as an image; its ID can be used
// as a template ID to create sandboxes from it.
type Snapshot struct {
	ID        string
	TeamID    string
	SandboxID string // the sandbox it was taken from
	Name      string // "" when the client gave none
	Image     string
	CreatedAt time.Time
	// AgentArgs are the agent arguments of the sandbox it was taken from,
	// which sandboxes created from it run their agent with. nil = none.
	AgentArgs []string
	// Memory is set when the snapshot kept the sandbox's processes and
	// memory too (the engine's memory image named by the snapshot's ID):
	// the identity the image's agent holds, which the server proves to
	// give a sandbox of it its own. nil = the filesystem only.
	Memory *AgentIdentity
}

// LogEntry is one line of a sandbox's log: a lifecycle event or a line the
// agent reported.
type LogEntry struct {
	SandboxID string
	Time      time.Time
	Level     string // debug, info, warn, error
	Message   string
	Fields    map[string]string
}

// SandboxFilter selects sandboxes in Store.ListSandboxes. Zero fields
// match everything.
type SandboxFilter struct {
	TeamID string
	States []State
}

// LogQuery selects log entries in Store.Logs.
type LogQuery struct {
	Since, Until time.Time // zero = unbounded
	Backward     bool      // newest first
	Limit        int       // 0 = no limit
}

// PoolDemand is what the creates of one template lately asked of the warm
// pool, kept so that a restarted server's pools are as large as before
// (internal/lifecycle's pool sizing): the template's ID, the team whose
// create was its latest (to resolve the template again), and the peaks of
// its demand.
type PoolDemand struct {
	TemplateID string
	TeamID     string
	Peaks      []DemandPeak // oldest first
}

// DemandPeak is a pool size a template's demand asked for At: the pool
// keeps it for a while after (a burst of that many creates, or as many in
// one second).
type DemandPeak struct {
	At   time.Time
	Size int
}

// Store is the source of truth for Warren's state. The lifecycle manager
// is the only writer of sandboxes; the API reads keys. Methods return an
// *Error of KindNotFound for a missing record.
type Store interface {
	// PutSandbox inserts or replaces a sandbox and stores the events
	// that tell of its change (each with its deliveries), in one
	// transaction: all of it or none.
	PutSandbox(ctx context.Context, sb Sandbox, evs ...Recorded) error
	GetSandbox(ctx context.Context, id string) (Sandbox, error)
	// ListSandboxes returns the matching sandboxes ordered by StartedAt,
	// then ID.
	ListSandboxes(ctx context.Context, f SandboxFilter) ([]Sandbox, error)
	// DeleteSandbox removes a sandbox with its logs and metrics.
	DeleteSandbox(ctx context.Context, id string) error

	PutTeam(ctx context.Context, t Team) error
	GetTeam(ctx context.Context, id string) (Team, error)
	// ListTeams returns every team, by ID.
	ListTeams(ctx context.Context) ([]Team, error)
	// SetTeamQuota replaces a team's quota; the team must exist.
	SetTeamQuota(ctx context.Context, teamID string, q Quota) error

	CreateAPIKey(ctx context.Context, k APIKey) error
	APIKeyByHash(ctx context.Context, hash string) (APIKey, error)
	ListAPIKeys(ctx context.Context) ([]APIKey, error)
	// RenameAPIKey changes the name of a key by its ID.
	RenameAPIKey(ctx context.Context, id, name string) error
	// DeleteAPIKey revokes a key by its ID.
	DeleteAPIKey(ctx context.Context, id string) error

	PutSnapshot(ctx context.Context, s Snapshot) error
	GetSnapshot(ctx context.Context, id string) (Snapshot, error)
	// ListSnapshots returns a team's snapshots, oldest first; sandboxID,
	// when not empty, keeps those taken from that sandbox.
	ListSnapshots(ctx context.Context, teamID, sandboxID string) ([]Snapshot, error)
	DeleteSnapshot(ctx context.Context, id string) error

	AppendLog(ctx context.Context, e LogEntry) error
	Logs(ctx context.Context, sandboxID string, q LogQuery) ([]LogEntry, error)

	// AddMetric records a sample. The sandbox's newest keep samples stay
	// as they are; older ones are thinned to one a minute, and those over
	// a day old to one per 10 minutes. keep <= 0 keeps every sample.
	AddMetric(ctx context.Context, sandboxID string, s Stats, keep int) error
	// Metrics returns a sandbox's samples with from <= Time <= to, oldest
	// first; zero bounds are open.
	Metrics(ctx context.Context, sandboxID string, from, to time.Time) ([]Stats, error)

	// SavePoolDemand replaces the pools' demand with ds; PoolDemand
	// returns it as saved, by template ID.
	SavePoolDemand(ctx context.Context, ds []PoolDemand) error
	PoolDemand(ctx context.Context) ([]PoolDemand, error)

	Close() error
}

// MakeAPIKey makes a new key of team named name: the key, shown to its
// maker once, and its record, which keeps only its hash and a mask.
func MakeAPIKey(team, name string, now time.Time) (string, APIKey) {
	key := NewAPIKey()
	return key, APIKey{
		ID:        NewToken()[:12],
		TeamID:    team,
		Name:      name,
		Hash:      HashAPIKey(key),
		Mask:      key[:8] + "…" + key[len(key)-4:],
		CreatedAt: now.UTC(),
	}
}
