package api

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/internal/httpedge"
	"github.com/warrenhq/warren/internal/phases"
	"github.com/warrenhq/warren/internal/sandbox"
)

// serverMetrics serves GET /metrics in Prometheus' text format: the
// server's sandboxes by state and pause mode, the warm pool by template,
// and the checkpoints on disk. It is for the operator: only keys of the
// default team (WARREN_API_KEY's) may read it, given as X-API-Key or as a
// bearer token (what Prometheus' authorization setting sends).
func (s *server) serverMetrics(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-API-Key") == "" {
		if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			r.Header.Set("X-API-Key", strings.TrimSpace(token))
		}
	}
	team, err := s.authenticate(r)
	if err == nil && team != sandbox.DefaultTeamID {
		err = sandbox.Errorf(sandbox.KindForbidden, "server metrics are for the operator's keys (the default team)")
	}
	if err != nil {
		httpedge.WriteError(w, err)
		return
	}
	st := s.m.ServerStats(r.Context())
	var b strings.Builder
	metric := func(name, help string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
	}
	metric("warren_sandboxes", "Live sandboxes by state, and by pause mode when paused.")
	fmt.Fprintf(&b, "warren_sandboxes{state=\"running\",mode=\"\"} %d\n", st.Running)
	modes := []sandbox.PauseMode{sandbox.PauseFrozen, sandbox.PauseStopped, sandbox.PauseCheckpointed}
	for m := range st.Paused {
		if !slices.Contains(modes, m) {
			modes = append(modes, m)
		}
	}
	for _, m := range modes {
		fmt.Fprintf(&b, "warren_sandboxes{state=\"paused\",mode=%q} %d\n", string(m), st.Paused[m])
	}
	metric("warren_warm_pool_ready", "Started containers waiting in the warm pool, by template.")
	for _, tpl := range slices.Sorted(maps.Keys(st.PoolReady)) {
		fmt.Fprintf(&b, "warren_warm_pool_ready{template=%q} %d\n", tpl, st.PoolReady[tpl])
	}
	metric("warren_warm_pool_size", "Started containers the warm pool keeps, by template (0: none).")
	for _, tpl := range slices.Sorted(maps.Keys(st.PoolSize)) {
		fmt.Fprintf(&b, "warren_warm_pool_size{template=%q} %d\n", tpl, st.PoolSize[tpl])
	}
	metric("warren_warm_pool_memory_bytes", "Memory the warm pool's budget counts for the containers of auto-sized pools beyond their floors, by template (an estimate per container, not a measurement).")
	for _, tpl := range slices.Sorted(maps.Keys(st.PoolMemoryMB)) {
		fmt.Fprintf(&b, "warren_warm_pool_memory_bytes{template=%q} %d\n", tpl, int64(st.PoolMemoryMB[tpl])<<20)
	}
	metric("warren_warm_pool_memory_budget_bytes", "The budget auto-sized warm pools share beyond their floors (--warm-pool-memory-mb).")
	fmt.Fprintf(&b, "warren_warm_pool_memory_budget_bytes %d\n", int64(st.PoolBudgetMB)<<20)
	metric("warren_checkpoints", "Checkpoints of checkpointed sandboxes.")
	fmt.Fprintf(&b, "warren_checkpoints %d\n", st.Checkpoints)
	if st.CheckpointErr != nil {
		fmt.Fprintf(&b, "# warren_checkpoint_bytes not measured: %s\n", strings.ReplaceAll(st.CheckpointErr.Error(), "\n", " "))
	} else {
		metric("warren_checkpoint_bytes", "Disk used by the checkpoints of checkpointed sandboxes.")
		fmt.Fprintf(&b, "warren_checkpoint_bytes %d\n", st.CheckpointBytes)
	}
	writeCreatePhases(&b, st.CreatePhases)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

// writeCreatePhases writes the histograms of the creates' steps
// (internal/phases) as warren_create_phase_seconds, by path (cold, pool,
// memory, and capture: the capture a fork or a memory snapshot starts
// with) and phase; phase "total" is the whole operation.
func writeCreatePhases(b *strings.Builder, series []phases.Series) {
	const name = "warren_create_phase_seconds"
	fmt.Fprintf(b, "# HELP %s Time of each step of the sandbox creates that succeeded, by path (cold: made its container; pool: claimed one; memory: restored from a memory image; capture: a fork's or memory snapshot's capture of its source) and phase.\n# TYPE %s histogram\n", name, name)
	for _, s := range series {
		labels := fmt.Sprintf("path=%q,phase=%q", s.Path, s.Step)
		var n uint64
		for i, c := range s.Counts {
			n += c
			le := "+Inf"
			if i < len(phases.Bounds) {
				le = strconv.FormatFloat(phases.Bounds[i], 'g', -1, 64)
			}
			fmt.Fprintf(b, "%s_bucket{%s,le=%q} %d\n", name, labels, le, n)
		}
		fmt.Fprintf(b, "%s_sum{%s} %g\n%s_count{%s} %d\n", name, labels, s.Sum.Seconds(), name, labels, s.Count)
	}
}
