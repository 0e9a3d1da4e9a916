package lifecycle

import (
	"context"
	"slices"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Logs returns a sandbox's log: the lifecycle events from the store merged
// in time order with what its agent logged, which the engine keeps for as
// long as the container exists. Killed sandboxes keep their events until
// their record is deleted (Settings.KilledRetention), but not the agent's
// lines.
func (m *Manager) Logs(ctx context.Context, teamID, id string, q sandbox.LogQuery) ([]sandbox.LogEntry, error) {
	sb, ok := m.cached(id)
	if !ok || sb.TeamID != teamID || sb.State == sandbox.StateCreating {
		return nil, sandbox.Errorf(sandbox.KindNotFound, "sandbox '%s' not found", id)
	}
	events, err := m.cfg.Store.Logs(ctx, id, sandbox.LogQuery{Since: q.Since, Until: q.Until})
	if err != nil {
		return nil, err
	}
	out := append(events, m.agentLogs(ctx, sb, q)...)
	slices.SortStableFunc(out, func(a, b sandbox.LogEntry) int { return a.Time.Compare(b.Time) })
	if q.Backward {
		slices.Reverse(out)
	}
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// agentLogs returns the agent's log lines within q's time range. A log the
// engine cannot give (the container is gone, say, or the engine keeps no
// log: no sandbox.LogReader) leaves only the events.
func (m *Manager) agentLogs(ctx context.Context, sb sandbox.Sandbox, q sandbox.LogQuery) []sandbox.LogEntry {
	if sb.ContainerID == "" || m.caps.logs == nil {
		return nil
	}
	lines, err := m.caps.logs.Logs(ctx, sb.ContainerID, q.Since)
	if err != nil {
		if sandbox.KindOf(err) != sandbox.KindNotFound {
			m.log.Warn("cannot read the agent's log", logkey.Sandbox, sb.ID, "err", err)
		}
		return nil
	}
	var out []sandbox.LogEntry
	for _, l := range lines {
		if !q.Until.IsZero() && l.Time.After(q.Until) {
			break
		}
		out = append(out, sandbox.AgentLogEntry(sb.ID, l))
	}
	return out
}
