// Package storetest is the conformance suite of Warren's stores: one
// table of cases, the same assertions, that the tests of every adapter
// (internal/store/sqlite, internal/store/postgres) run against a store of
// their own, and the benchmarks that compare them. It holds what a store
// must do as its users see it; what is one adapter's own (its migrations,
// its writer's batches) stays in that adapter's tests, which share the
// helpers of adapter.go.
package storetest

import (
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/store"
)

// Store is the interface the suite checks, Warren's store.
type Store = store.Store

// Opener returns a new, empty store (but for its default team), closed
// when tb ends.
type Opener func(tb testing.TB) Store

// testCase is one case of the suite; run gets a store of its own.
type testCase struct {
	name string
	run  func(t *testing.T, s Store)
}

// cases is the suite, in the order it runs.
var cases = []testCase{
	{"Sandboxes", testSandboxes},
	{"ConcurrentWrites", testConcurrentWrites},
	{"APIKeys", testAPIKeys},
	{"TeamQuotas", testTeamQuotas},
	{"RenameAPIKey", testRenameAPIKey},
	{"Dashboard", testDashboard},
	{"Snapshots", testSnapshots},
	{"LogsAndMetrics", testLogsAndMetrics},
	{"MetricsKeepAll", testMetricsKeepAll},
	{"MetricsThinning", testMetricsThinning},
	{"PoolDemand", testPoolDemand},
	{"Secrets", testSecrets},
	{"Volumes", testVolumes},
	{"Templates", testTemplates},
	{"BuildLogText", testBuildLogText},
	{"Events", testEvents},
	{"Webhooks", testWebhooks},
	{"Deliveries", testDeliveries},
	{"SandboxWithEvents", testSandboxWithEvents},
	{"EventRetention", testEventRetention},
}

// Run runs the suite, each case as a subtest (-run 'Store/Secrets') on
// a store of its own from open.
func Run(t *testing.T, open Opener) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, open(t)) })
	}
}

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
