package lifecycle

import (
	"context"
	"errors"
	"net/netip"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Egress rules follow a sandbox's container address: they are applied
// whenever the container starts (create, claim from the pool, resume from
// stopped) before its agent is initialised, so no user code runs without
// them; removed whenever it stops or goes (pause to stopped, demotion,
// kill, found stopped or vanished), because the engine hands a released
// address to the next container; kept while frozen, which keeps the
// address. On Start every rule is rewritten from the store and the
// engine's addresses; each reconcile reinstalls them in case they were
// lost. Without a Deps.Firewall nothing is enforced.

// applyEgress installs sb's egress rules for its container's address ip.
// The caller holds sb's lock.
func (m *Manager) applyEgress(ctx context.Context, sb sandbox.Sandbox, ip netip.Addr) error {
	if m.cfg.Firewall == nil {
		return nil
	}
	err := m.cfg.Firewall.Apply(ctx, sb.ID, sandbox.Egress{IP: ip, TeamID: sb.TeamID, Network: sb.Network})
	var se *sandbox.Error
	if err == nil || errors.As(err, &se) {
		return err // nil, or already says what the client did wrong
	}
	return sandbox.Wrap(sandbox.KindInternal, err, "failed to apply the sandbox's network rules")
}

// removeEgress deletes a sandbox's egress rules once its container lost
// its address. The caller holds its lock.
func (m *Manager) removeEgress(ctx context.Context, id string) {
	if m.cfg.Firewall == nil {
		return
	}
	if err := m.cfg.Firewall.Remove(context.WithoutCancel(ctx), id); err != nil {
		m.log.Error("cannot remove the sandbox's network rules", logkey.Sandbox, id, "err", err)
	}
}

// syncFirewall rewrites every sandbox's egress rules: those of running
// and frozen sandboxes, at their containers' current addresses. Start
// calls it before anything else can change sandboxes.
func (m *Manager) syncFirewall(ctx context.Context) error {
	if m.cfg.Firewall == nil {
		return nil
	}
	list, err := m.cfg.Runtime.List(ctx)
	if err != nil {
		return err
	}
	ips := make(map[string]netip.Addr, len(list))
	for _, c := range list {
		ips[c.ID] = c.IP
	}
	rules := map[string]sandbox.Egress{}
	for _, sb := range m.snapshotAll() {
		live := sb.State == sandbox.StateRunning || (sb.State == sandbox.StatePaused && sb.PauseMode == sandbox.PauseFrozen)
		if ip := ips[sb.ContainerID]; live && ip.IsValid() {
			rules[sb.ID] = sandbox.Egress{IP: ip, TeamID: sb.TeamID, Network: sb.Network}
		}
	}
	return m.cfg.Firewall.Sync(ctx, rules)
}

// restoreFirewall reinstalls the rules if something removed them.
func (m *Manager) restoreFirewall(ctx context.Context) {
	if m.cfg.Firewall == nil {
		return
	}
	if err := m.cfg.Firewall.Restore(ctx); err != nil {
		m.log.Error("cannot reinstall the firewall rules", "err", err)
	}
}

// UpdateNetwork replaces a sandbox's egress settings and, when its
// container has an address (running or frozen), enforces them at once.
// Connections already open stay open.
func (m *Manager) UpdateNetwork(ctx context.Context, teamID, id string, n sandbox.Network) error {
	if err := n.ValidateEgress(); err != nil {
		return err
	}
	defer m.locks.lock(id)()
	sb, err := m.live(teamID, id)
	if err != nil {
		return err
	}
	sb.Network.AllowOut, sb.Network.DenyOut = n.AllowOut, n.DenyOut
	sb.Network.EgressProxy, sb.Network.Rules = n.EgressProxy, n.Rules
	sb.Network.AllowInternetAccess = n.AllowInternetAccess
	if m.cfg.Firewall != nil && (sb.State == sandbox.StateRunning || sb.PauseMode == sandbox.PauseFrozen) {
		c, err := m.cfg.Runtime.Inspect(ctx, sb.ContainerID)
		if err != nil {
			return sandbox.Wrap(sandbox.KindInternal, err, "failed to update the sandbox's network rules")
		}
		if err := m.applyEgress(ctx, sb, c.IP); err != nil {
			return err
		}
	}
	if err := m.save(ctx, sb); err != nil {
		return err
	}
	m.event(ctx, sb.ID, "info", "network updated")
	return nil
}
