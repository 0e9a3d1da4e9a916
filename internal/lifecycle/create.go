package lifecycle

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/google/uuid"

	"github.com/warrenhq/warren/internal/logkey"
	"github.com/warrenhq/warren/internal/phases"
	"github.com/warrenhq/warren/internal/sandbox"
	templates "github.com/warrenhq/warren/internal/template"
)

// CreateRequest is what a client asks for when creating a sandbox.
type CreateRequest struct {
	TeamID   string
	Template string        // "base", a snapshot ID or name, or a local image reference
	Timeout  time.Duration // must be > 0 and <= Settings.MaxTimeout
	Metadata map[string]string
	EnvVars  map[string]string
	// Secure issues an envd access token the agent then requires.
	Secure    bool
	Lifecycle sandbox.Lifecycle
	Network   sandbox.Network
	// IAM is the sandbox's workload identity, checked by the caller
	// (sandbox.IAM.Validate). Zero = none.
	IAM sandbox.IAM
	// VolumeMounts are the volumes to mount, resolved by the caller to
	// the team's own. nil = none.
	VolumeMounts []sandbox.VolumeMount

	id string // the sandbox's ID, chosen by Create (keyedCreate); "" = a new one
}

// template is a resolved template: what a sandbox runs. A built
// template adds resource defaults (0 = the server's), commands to start
// and wait for, and the user, workdir and env its processes get.
type template struct {
	id, alias, image string
	buildID          string // of a built template; "" otherwise

	cpuCount, memoryMB                int
	startCmd, readyCmd, user, workdir string
	env                               map[string]string
	agentArgs                         []string // the agent's arguments; nil = none
	// runtime is what the image needs its sandboxes to run under (its
	// sandbox.LabelRuntime label); "" = the server's default.
	runtime sandbox.OCIRuntime
	// memory is the key of the engine's memory image its sandboxes are
	// restored from (a fork's, a memory snapshot's), and restored the
	// identity that image's agent holds; "" = they boot afresh.
	memory   string
	restored sandbox.AgentIdentity
	// captured, when not nil, returns once the memory image is made, or
	// why the sandbox cannot be restored from it: a fork's sandboxes are
	// created while their source is being captured. nil = it is made.
	captured func(context.Context) error
}

// agentStart is what the agent of a container that has just started
// already has.
type agentStart struct {
	// prepared: it answered and took the CA when it was pooled (warmpool).
	prepared bool
	// restored: it was restored from another sandbox's memory and holds
	// that sandbox's identity (zero = it did not).
	restored sandbox.AgentIdentity
}

// TemplateResolver finds built templates by ID or name (with an optional
// ":tag"); a ref that is not one is KindNotFound.
type TemplateResolver interface {
	Resolve(ctx context.Context, teamID, ref string) (templates.Resolved, error)
}

// CommandRunner runs commands in a sandbox through its agent at addr.
type CommandRunner interface {
	// StartCommand starts cmd and returns once it runs; it keeps running.
	StartCommand(ctx context.Context, addr, accessToken, user, workdir, cmd string, env map[string]string) error
	// RunCommand runs cmd to its end: its exit code and last output.
	RunCommand(ctx context.Context, addr, accessToken, user, workdir, cmd string, env map[string]string) (int, string, error)
}

// Built-in templates: images `warren image build` makes, with no
// registry. The code interpreter is what @e2b/code-interpreter asks for;
// the MCP gateway is what the e2b SDK's `Sandbox.create({ mcp })` asks for
// (Sandbox.defaultMcpTemplate), to run `mcp-gateway --config` in; the
// desktop is what @e2b/desktop's Sandbox.create() asks for.
const (
	BaseTemplate            = "base"
	CodeInterpreterTemplate = "code-interpreter-v1"
	MCPGatewayTemplate      = "mcp-gateway"
	DesktopTemplate         = "desktop"
)

// DesktopMemoryMB is the desktop template's memory unless the client asks:
// an XFCE session idles at about 200 MiB, and a browser in it needs the rest.
const DesktopMemoryMB = 2048

// DesktopArgs are the agent arguments of desktop sandboxes: it starts the
// image's desktop at boot, so pooled sandboxes have it up.
func DesktopArgs() []string { return []string{"-desktop"} }

// CodeInterpreterArgs are the agent arguments of code interpreter
// sandboxes: it serves E2B's code-interpreter API beside envd's.
func CodeInterpreterArgs() []string { return []string{"-code-interpreter"} }

// builtinTemplate returns the built-in template ref names, if it is one,
// and the `warren image build` argument that makes its image ("" for
// base, which must exist). The warm pools keep containers of base and
// the code interpreter.
func (m *Manager) builtinTemplate(ref string) (tpl template, build string, ok bool) {
	switch ref {
	case "", BaseTemplate:
		return template{id: BaseTemplate, alias: BaseTemplate, image: m.cfg.BaseImage}, "", true
	case CodeInterpreterTemplate:
		return template{id: CodeInterpreterTemplate, alias: CodeInterpreterTemplate, image: m.cfg.CodeInterpreterImage,
			agentArgs: CodeInterpreterArgs()}, "code-interpreter", true
	case MCPGatewayTemplate:
		return template{id: MCPGatewayTemplate, alias: MCPGatewayTemplate, image: m.cfg.MCPGatewayImage}, "mcp-gateway", true
	case DesktopTemplate:
		return template{id: DesktopTemplate, alias: DesktopTemplate, image: m.cfg.DesktopImage, memoryMB: DesktopMemoryMB,
			agentArgs: DesktopArgs()}, "desktop", true
	}
	return template{}, "", false
}

// resolveTemplate maps a client's template ID to an image: the built-in
// templates, then built templates, then the team's snapshots by ID or
// name, then a local image by its full reference (localImage).
func (m *Manager) resolveTemplate(ctx context.Context, teamID, ref string) (template, error) {
	if tpl, build, ok := m.builtinTemplate(ref); ok {
		if build == "" {
			return tpl, nil
		}
		exists, err := m.cfg.Runtime.ImageExists(ctx, tpl.image)
		if err != nil {
			return template{}, sandbox.Wrap(sandbox.KindUnavailable, err, "cannot reach the container engine")
		}
		if !exists {
			return template{}, sandbox.Errorf(sandbox.KindNotFound,
				"template '%s' needs the image %s, which is not built: run `warren image build %s` on the server", ref, tpl.image, build)
		}
		return tpl, nil
	}
	if m.cfg.Templates != nil {
		rt, err := m.cfg.Templates.Resolve(ctx, teamID, ref)
		if err == nil {
			return template{id: rt.ID, alias: rt.Alias, image: rt.Image, buildID: rt.BuildID, cpuCount: rt.CPUCount, memoryMB: rt.MemoryMB,
				startCmd: rt.StartCmd, readyCmd: rt.ReadyCmd, user: rt.User, workdir: rt.Workdir, env: rt.Env,
				agentArgs: rt.AgentArgs}, nil
		}
		if sandbox.KindOf(err) != sandbox.KindNotFound {
			return template{}, err
		}
	}
	snapID := strings.TrimSuffix(ref, ":default")
	if sn, err := m.cfg.Store.GetSnapshot(ctx, snapID); err == nil && sn.TeamID == teamID {
		return m.snapshotTemplate(sn, sn.ID), nil
	}
	snaps, err := m.cfg.Store.ListSnapshots(ctx, teamID, "")
	if err != nil {
		return template{}, err
	}
	for _, sn := range snaps {
		if sn.Name != "" && sn.Name == ref {
			return m.snapshotTemplate(sn, sn.Name), nil
		}
	}
	return m.localImage(ctx, ref)
}

// snapshotTemplate is the template of a snapshot: its sandboxes are
// restored from its memory image when it has one and this engine can
// (under gVisor, whatever the server's default), else they boot on its
// filesystem.
func (m *Manager) snapshotTemplate(sn sandbox.Snapshot, alias string) template {
	tpl := template{id: sn.ID, image: sn.Image, agentArgs: sn.AgentArgs}
	if alias != sn.ID {
		tpl.alias = alias
	}
	if sn.Memory != nil && m.caps.memory != nil {
		tpl.memory, tpl.restored, tpl.runtime = sn.ID, *sn.Memory, sandbox.RuntimeGVisor
	}
	return tpl
}

// localImage resolves ref as an image on the engine, which only its full
// reference names (name[:tag] or name@digest, as one of the image's own
// references): never its ID or a prefix of one, and never an image of
// Warren's, which a team reaches only as its snapshot or template. The
// image is then run by that reference in full, which the engine cannot
// take for an ID prefix either.
func (m *Manager) localImage(ctx context.Context, ref string) (template, error) {
	named, err := sandbox.ParseImageRef(ref)
	if err != nil {
		return template{}, sandbox.Errorf(sandbox.KindInvalid, "invalid template ID '%s': %s", ref, sandbox.Message(err))
	}
	if sandbox.OwnImage(reference.FamiliarName(named)) {
		return template{}, sandbox.Errorf(sandbox.KindNotFound,
			"template '%s' not found: sandboxes start from snapshots and built templates by their ID or name, not by the image's", ref)
	}
	img, err := m.cfg.Runtime.InspectImage(ctx, named.String())
	switch {
	case sandbox.KindOf(err) == sandbox.KindNotFound:
		return template{}, sandbox.Errorf(sandbox.KindNotFound, "template '%s' not found", ref)
	case err != nil:
		return template{}, sandbox.Wrap(sandbox.KindUnavailable, err, "cannot reach the container engine")
	case !img.NamedBy(named) || img.Warrens():
		return template{}, sandbox.Errorf(sandbox.KindNotFound, "template '%s' not found", ref)
	}
	return template{id: ref, image: named.String()}, nil
}

func (m *Manager) checkTimeout(d time.Duration) error {
	if d <= 0 {
		return sandbox.Errorf(sandbox.KindInvalid, "timeout must be positive")
	}
	if d > m.cfg.MaxTimeout {
		return sandbox.Errorf(sandbox.KindInvalid, "timeout cannot be greater than %d seconds", int(m.cfg.MaxTimeout/time.Second))
	}
	return nil
}

// Create makes a sandbox and returns it running, its agent initialised.
// A failure half-way removes whatever was made.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (sandbox.Sandbox, error) {
	ctx, _ = phases.Start(ctx)
	if err := m.checkTimeout(req.Timeout); err != nil {
		return sandbox.Sandbox{}, err
	}
	if err := req.Network.ValidateEgress(); err != nil {
		return sandbox.Sandbox{}, err
	}
	tpl, err := m.resolveTemplate(ctx, req.TeamID, req.Template)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	if tpl.memory == "" {
		if tpl.runtime, err = m.requiredRuntime(ctx, tpl); err != nil {
			return sandbox.Sandbox{}, err
		}
	}
	phases.Mark(ctx, "resolve")
	id, made, ok := m.keyedCreate(ctx, req.TeamID)
	if ok {
		return made, nil
	}
	req.id = id
	return m.create(ctx, req, tpl)
}

// requiredRuntime reads whether a template's image asks for gVisor with
// its sandbox.LabelRuntime label, and checks that the engine has it. An
// image cannot ask for less isolation than the server gives: "runc" (the
// label of snapshots of runc sandboxes) leaves the server's default. The
// base template (the warm pool's) asks for nothing.
func (m *Manager) requiredRuntime(ctx context.Context, tpl template) (sandbox.OCIRuntime, error) {
	if tpl.image == m.cfg.BaseImage {
		return "", nil
	}
	labels, err := m.imageLabels(ctx, tpl.image)
	if err != nil {
		return "", sandbox.Wrap(sandbox.KindUnavailable, err, "cannot read the template's image")
	}
	want, ok := labels[sandbox.LabelRuntime]
	if !ok {
		return "", nil
	}
	rt, err := sandbox.ParseOCIRuntime(want)
	if err != nil {
		return "", sandbox.Errorf(sandbox.KindInvalid, "template '%s': its image's label %s=%q names no runtime (want runc or gvisor)", tpl.id, sandbox.LabelRuntime, want)
	}
	if rt != sandbox.RuntimeGVisor {
		return "", nil
	}
	if c := m.caps.checker; c != nil && rt != m.cfg.SandboxRuntime {
		if err := c.CheckRuntime(ctx, rt); err != nil {
			return "", sandbox.Errorf(sandbox.KindInvalid, "template '%s' needs the %s runtime (its image's label %s), which this server cannot give: %s",
				tpl.id, rt, sandbox.LabelRuntime, err.Error())
		}
	}
	return rt, nil
}

// engineWork is the context for work on the engine that a client's
// request starts: it is not cancelled when the client goes away, since a
// container cut short half-way through its start can leave the engine (and
// runsc above all) stuck on it, but it ends after limit.
func engineWork(ctx context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), limit)
}

// changeLimit bounds a change of state on the engine: a pause, a
// checkpoint, a kill, a commit.
const changeLimit = 5 * time.Minute

// createLimit bounds a whole create: the engine's create and start, the
// agent's init and the template's ready command.
func (m *Manager) createLimit() time.Duration {
	return 2*time.Minute + m.cfg.InitTimeout + m.cfg.ReadyTimeout
}

// create makes the sandbox to the end even when the client has gone away
// meanwhile (see engineWork); then, as no one has its ID or tokens, it
// kills it. A create whose client went away while it waited to start
// (AdmitCold) starts nothing.
func (m *Manager) create(client context.Context, req CreateRequest, tpl template) (sandbox.Sandbox, error) {
	cpus, memoryMB := m.resourcesOf(tpl)
	client, release, err := m.admitCreate(client, req.TeamID, cpus, memoryMB, m.cfg.DiskSizeMB)
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	defer release()
	ctx, cancel := engineWork(client, m.createLimit())
	defer cancel()
	sb, err := m.createSandbox(ctx, client, req, tpl)
	if err != nil || client.Err() == nil {
		return sb, err
	}
	m.log.Warn("the client went away before its sandbox was up; killing it", logkey.Sandbox, sb.ID)
	defer m.pool.AdmitRemoval(ctx, req.TeamID)()
	unlock := m.locks.lock(sb.ID)
	defer unlock()
	if err := m.kill(ctx, sb, "client went away"); err != nil {
		m.log.Error("cannot kill the sandbox", logkey.Sandbox, sb.ID, "err", err)
	}
	return sandbox.Sandbox{}, sandbox.Wrap(sandbox.KindUnavailable, client.Err(), "the client went away before the sandbox was up")
}

// createSandbox makes sb in ctx, the engine's work; client is the
// client's request, which a create that must wait for the cold gate
// waits in: one whose client has gone by its turn claims no pooled
// container and starts none, but gives its turn to the next.
func (m *Manager) createSandbox(ctx, client context.Context, req CreateRequest, tpl template) (sandbox.Sandbox, error) {
	now := time.Now().UTC()
	sb := sandbox.Sandbox{
		ID:          cmp.Or(req.id, sandbox.NewID()),
		TeamID:      req.TeamID,
		TemplateID:  tpl.id,
		Alias:       tpl.alias,
		Image:       tpl.image,
		BuildID:     tpl.buildID,
		ExecutionID: uuid.NewString(),
		AgentSecret: sandbox.NewToken(),
		State:       sandbox.StateCreating,
		DiskSizeMB:  m.cfg.DiskSizeMB,
		Metadata:    maps.Clone(req.Metadata),
		EnvVars:     maps.Clone(req.EnvVars),
		StartedAt:   now,
		Timeout:     req.Timeout,
		Lifecycle:   req.Lifecycle,
		Network:     req.Network,
		IAM:         req.IAM,
		StartCmd:    tpl.startCmd,
		ReadyCmd:    tpl.readyCmd,
		User:        tpl.user,
		Workdir:     tpl.workdir,
		AgentArgs:   slices.Clone(tpl.agentArgs),
		Runtime:     m.cfg.SandboxRuntime,
		// A warm pool container has no mounts, so the pool serves
		// none for a sandbox that has some.
		VolumeMounts: slices.Clone(req.VolumeMounts),
	}
	if tpl.runtime != "" {
		sb.Runtime = tpl.runtime
	}
	sb.CPUCount, sb.MemoryMB = m.resourcesOf(tpl)
	if len(tpl.env) > 0 {
		// The client's variables win over the template's.
		sb.EnvVars = maps.Clone(tpl.env)
		maps.Copy(sb.EnvVars, req.EnvVars)
	}
	if req.Secure {
		sb.EnvdAccessToken = sandbox.NewToken()
	}
	if !req.Network.AllowPublicTraffic {
		sb.TrafficAccessToken = sandbox.NewToken()
	}
	defer m.pool.Begin(sb)()
	// A sandbox restored from memory has no pooled container to claim.
	fromPool := tpl.memory == ""
	if fromPool {
		if out, ok, err := m.createFromPool(ctx, sb); ok {
			return out, err
		}
	}
	phases.Mark(ctx, "pool_miss")
	var (
		claim    sandbox.Sandbox
		claimErr error
	)
	release, claimed, err := m.pool.AdmitCold(client, sb.TeamID, func() bool {
		if !fromPool || client.Err() != nil {
			return false
		}
		phases.Mark(ctx, "gate")
		var ok bool
		claim, ok, claimErr = m.createFromPool(ctx, sb)
		return ok
	})
	if err != nil {
		return sandbox.Sandbox{}, err
	}
	if claimed {
		return claim, claimErr
	}
	defer release()
	if err := client.Err(); err != nil { // it went as the slot came
		return sandbox.Sandbox{}, sandbox.Wrap(sandbox.KindUnavailable, err, "the create was cancelled while waiting to start")
	}
	phases.Mark(ctx, "gate")
	unlock := m.locks.lock(sb.ID)
	defer unlock()
	log := m.log.With(logkey.Sandbox, sb.ID, logkey.Team, sb.TeamID, logkey.Template, sb.TemplateID)
	if err := m.save(ctx, sb); err != nil {
		return sandbox.Sandbox{}, err
	}
	phases.Mark(ctx, "save")
	var c sandbox.Container
	if tpl.memory != "" {
		c, err = m.caps.memory.CreateFromMemory(ctx, m.containerSpec(sb), tpl.memory, tpl.captured)
	} else {
		c, err = m.cfg.Runtime.Create(ctx, m.containerSpec(sb))
	}
	if err != nil {
		log.Error("create container failed", "err", err)
		m.abandon(ctx, sb)
		return sandbox.Sandbox{}, sandbox.Wrap(sandbox.KindInternal, err, "failed to create sandbox")
	}
	sb.ContainerID, sb.AgentAddr = c.ID, c.AgentAddr
	phases.Mark(ctx, "engine")
	if _, err := m.bringUp(ctx, &sb, c.IP, m.cfg.InitTimeout, agentStart{restored: tpl.restored}); err != nil {
		log.Error("sandbox start failed", logkey.Container, c.ID, "err", err)
		m.abandon(ctx, sb)
		return sandbox.Sandbox{}, err
	}
	m.event(ctx, sb.ID, "info", "sandbox created", "template", sb.TemplateID, "image", sb.Image)
	if tpl.memory != "" {
		log.Info("sandbox created from a memory image", logkey.Container, c.ID, "phases", phases.From(ctx).String())
		m.observeCreate(ctx, "memory")
	} else {
		log.Info("sandbox created", logkey.Container, c.ID, "phases", phases.From(ctx).String())
		m.observeCreate(ctx, "cold")
	}
	return sb, nil
}

// resourcesOf returns the CPUs and memory a sandbox of tpl gets: the
// template's, held to the server's maxima (the API refuses more, but a
// template may have been built with more before they were lowered), or
// the server's.
func (m *Manager) resourcesOf(tpl template) (cpuCount, memoryMB int) {
	cpuCount, memoryMB = m.cfg.CPUCount, m.cfg.MemoryMB
	if tpl.cpuCount > 0 {
		cpuCount = min(tpl.cpuCount, m.cfg.MaxCPUCount)
	}
	if tpl.memoryMB > 0 {
		memoryMB = min(tpl.memoryMB, m.cfg.MaxMemoryMB)
	}
	return cpuCount, memoryMB
}

// bringUp takes a sandbox whose container has started to running: its
// egress rules, the agent's init (see initAgent), the template's start
// and ready commands (not for an agent restored from memory, whose
// processes run already), then the running state saved with the event of
// the create. initFailed tells the warm
// pool that the container itself is at fault, so a fresh one may do
// better. On error the caller abandons the sandbox.
func (m *Manager) bringUp(ctx context.Context, sb *sandbox.Sandbox, ip netip.Addr, initTimeout time.Duration, agent agentStart) (initFailed bool, err error) {
	if err := m.applyEgress(ctx, *sb, ip); err != nil {
		return false, err
	}
	phases.Mark(ctx, "egress")
	if err := m.initAgent(ctx, *sb, initTimeout, agent); err != nil {
		return true, sandbox.Wrap(sandbox.KindInternal, err, "failed to start sandbox agent")
	}
	phases.Mark(ctx, "agent")
	if agent.restored == (sandbox.AgentIdentity{}) {
		if err := m.startTemplate(ctx, *sb); err != nil {
			return false, err
		}
	}
	phases.Mark(ctx, "template")
	now := time.Now().UTC()
	sb.State, sb.StartedAt, sb.EndAt = sandbox.StateRunning, now, now.Add(sb.Timeout)
	err = m.save(ctx, *sb, m.tell(ctx, *sb, sandbox.EventCreated, nil)...)
	phases.Mark(ctx, "save_running")
	return false, err
}

// abandon removes a half-made sandbox's container and record.
func (m *Manager) abandon(ctx context.Context, sb sandbox.Sandbox) {
	ctx = context.WithoutCancel(ctx)
	if sb.ContainerID != "" {
		if err := m.cfg.Runtime.Remove(ctx, sb.ContainerID); err != nil && sandbox.KindOf(err) != sandbox.KindNotFound {
			m.log.Error("cannot remove container of failed sandbox", logkey.Sandbox, sb.ID, logkey.Container, sb.ContainerID, "err", err)
		}
	}
	m.removeEgress(ctx, sb.ID)
	if err := m.forget(ctx, sb.ID); err != nil {
		m.log.Error("cannot delete failed sandbox", logkey.Sandbox, sb.ID, "err", err)
	}
}

func (m *Manager) containerSpec(sb sandbox.Sandbox) sandbox.ContainerSpec {
	pids := m.cfg.PidsLimit
	if pids < 0 {
		pids = 0
	}
	rt := sb.Runtime
	if rt == "" {
		rt = m.cfg.SandboxRuntime
	}
	var mounts []sandbox.Mount
	for _, v := range sb.VolumeMounts {
		mounts = append(mounts, sandbox.Mount{Source: v.Source, Target: v.Path})
	}
	return sandbox.ContainerSpec{
		SandboxID:   sb.ID,
		Image:       sb.Image,
		Runtime:     rt,
		Labels:      map[string]string{sandbox.LabelTeam: sb.TeamID},
		CPUCount:    sb.CPUCount,
		MemoryMB:    sb.MemoryMB,
		PidsLimit:   pids,
		DiskMB:      sb.DiskSizeMB,
		AgentSecret: sb.AgentSecret,
		AgentArgs:   slices.Clone(sb.AgentArgs),
		Mounts:      mounts,
	}
}

// initAgent waits for the agent of a started container and configures it;
// a prepared one (warmpool) is configured at once, and not given the
// CA it has, nor is a restored one, which is given sb's identity.
func (m *Manager) initAgent(ctx context.Context, sb sandbox.Sandbox, timeout time.Duration, agent agentStart) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	user := sb.User
	if user == "" {
		user = m.cfg.DefaultUser
	}
	init := sandbox.AgentInit{
		AgentSecret:    sb.AgentSecret,
		EnvVars:        sb.EnvVars,
		AccessToken:    sb.EnvdAccessToken,
		DefaultUser:    user,
		DefaultWorkdir: sb.Workdir,
		Answered:       agent.prepared,
		Restored:       agent.restored,
	}
	if !agent.prepared && agent.restored == (sandbox.AgentIdentity{}) {
		init.CABundle = m.cfg.CABundle
	}
	return m.cfg.Agent.Init(ctx, sb.AgentAddr, init)
}

// startTemplate starts a template's start command in the background, then
// runs its ready command until it succeeds, for at most ReadyTimeout.
func (m *Manager) startTemplate(ctx context.Context, sb sandbox.Sandbox) error {
	if sb.StartCmd == "" && sb.ReadyCmd == "" {
		return nil
	}
	if m.cfg.Commands == nil {
		return sandbox.Errorf(sandbox.KindInternal, "cannot run the template's start command: no command runner configured")
	}
	user := sb.User
	if user == "" {
		user = m.cfg.DefaultUser
	}
	run := m.cfg.Commands
	if sb.StartCmd != "" {
		if err := run.StartCommand(ctx, sb.AgentAddr, sb.EnvdAccessToken, user, sb.Workdir, sb.StartCmd, nil); err != nil {
			return sandbox.Wrap(sandbox.KindInternal, err, "template start command failed to start: "+sandbox.Message(err))
		}
	}
	if sb.ReadyCmd == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.ReadyTimeout)
	defer cancel()
	delay := 50 * time.Millisecond
	var last string
	for {
		code, out, err := run.RunCommand(ctx, sb.AgentAddr, sb.EnvdAccessToken, user, sb.Workdir, sb.ReadyCmd, nil)
		if err == nil && code == 0 {
			return nil
		}
		last = fmt.Sprintf("exit code %d", code)
		if err != nil {
			last = sandbox.Message(err)
		}
		if out = strings.TrimSpace(out); out != "" {
			last += ", output: " + lastLine(out)
		}
		select {
		case <-ctx.Done():
			return sandbox.Errorf(sandbox.KindInternal, "template ready command '%s' did not succeed within %s (last attempt: %s)",
				sb.ReadyCmd, m.cfg.ReadyTimeout, last)
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// observeCreate adds the steps of the create traced in ctx to the
// histograms of path ("cold": it made its container; "pool": it claimed
// one; "memory": it was restored from a memory image), which GET /metrics exports (ServerStats.CreatePhases). Only
// creates that succeed are counted.
func (m *Manager) observeCreate(ctx context.Context, path string) {
	m.createPhases.Observe(path, phases.From(ctx))
}
