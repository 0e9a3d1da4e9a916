package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/warrenhq/warren/internal/sandbox"
)

// PutSnapshot inserts or replaces a snapshot.
func (s *Store) PutSnapshot(ctx context.Context, sn sandbox.Snapshot) error {
	args, err := json.Marshal(sn.AgentArgs)
	if err != nil {
		return fmt.Errorf("encode snapshot %s: %w", sn.ID, err)
	}
	memory, err := json.Marshal(sn.Memory)
	if err != nil {
		return fmt.Errorf("encode snapshot %s: %w", sn.ID, err)
	}
	_, err = s.db.Exec(ctx,
		`INSERT INTO snapshots (`+snapshotColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		 ON CONFLICT (id) DO UPDATE SET name=excluded.name, image=excluded.image, agent_args=excluded.agent_args, memory=excluded.memory`,
		sn.ID, sn.TeamID, sn.SandboxID, sn.Name, sn.Image, unixNano(sn.CreatedAt), string(args), string(memory))
	if err != nil {
		return fmt.Errorf("put snapshot %s: %w", sn.ID, err)
	}
	return nil
}

const snapshotColumns = `id, team_id, sandbox_id, name, image, created_at, agent_args, memory`

func scanSnapshot(row Row) (sandbox.Snapshot, error) {
	var sn sandbox.Snapshot
	var created int64
	var args, memory string
	if err := row.Scan(&sn.ID, &sn.TeamID, &sn.SandboxID, &sn.Name, &sn.Image, &created, &args, &memory); err != nil {
		return sandbox.Snapshot{}, err
	}
	sn.CreatedAt = fromUnixNano(created)
	if err := json.Unmarshal([]byte(args), &sn.AgentArgs); err != nil {
		return sandbox.Snapshot{}, fmt.Errorf("decode snapshot %s: %w", sn.ID, err)
	}
	if err := json.Unmarshal([]byte(memory), &sn.Memory); err != nil {
		return sandbox.Snapshot{}, fmt.Errorf("decode snapshot %s: %w", sn.ID, err)
	}
	if len(sn.AgentArgs) == 0 {
		sn.AgentArgs = nil
	}
	return sn, nil
}

// GetSnapshot returns a snapshot by ID.
func (s *Store) GetSnapshot(ctx context.Context, id string) (sandbox.Snapshot, error) {
	sn, err := scanSnapshot(s.db.QueryRow(ctx, `SELECT `+snapshotColumns+` FROM snapshots WHERE id = $1`, id))
	if err != nil {
		return sandbox.Snapshot{}, notFound(err, "snapshot")
	}
	return sn, nil
}

// ListSnapshots returns a team's snapshots, oldest first, optionally only
// those of one sandbox.
func (s *Store) ListSnapshots(ctx context.Context, teamID, sandboxID string) ([]sandbox.Snapshot, error) {
	out, err := collect(ctx, s.db, scanSnapshot,
		`SELECT `+snapshotColumns+` FROM snapshots WHERE team_id = $1 AND ($2 = '' OR sandbox_id = $2)
		 ORDER BY created_at, id`, teamID, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	return out, nil
}

// DeleteSnapshot removes a snapshot record.
func (s *Store) DeleteSnapshot(ctx context.Context, id string) error {
	return changeOne(ctx, s.db, "delete snapshot", "snapshot "+id+" not found", `DELETE FROM snapshots WHERE id = $1`, id)
}
