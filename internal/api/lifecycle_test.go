package api

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/sandbox"
)

// TestCreateLifecycleMapping: how the create body's autoPause,
// autoPauseMemory and autoResume become the sandbox's lifecycle. SDK
// 2.51 sends lifecycle {onTimeout: {action: 'pause', keepMemory: false}}
// as autoPause: true, autoPauseMemory: false.
func TestCreateLifecycleMapping(t *testing.T) {
	a := newAPI(t)
	for _, tc := range []struct {
		name       string
		body       map[string]any
		want       sandbox.Lifecycle
		wantDetail map[string]any
	}{
		{"nothing set", map[string]any{},
			sandbox.Lifecycle{OnTimeout: sandbox.TimeoutKill, KeepMemory: true}, map[string]any{"onTimeout": "kill", "autoResume": false}},
		{"onTimeout kill", map[string]any{"autoPause": false},
			sandbox.Lifecycle{OnTimeout: sandbox.TimeoutKill, KeepMemory: true}, map[string]any{"onTimeout": "kill", "autoResume": false}},
		{"onTimeout pause", map[string]any{"autoPause": true},
			sandbox.Lifecycle{OnTimeout: sandbox.TimeoutPause, KeepMemory: true}, map[string]any{"onTimeout": "pause", "autoResume": false}},
		{"pause keepMemory true", map[string]any{"autoPause": true, "autoPauseMemory": true},
			sandbox.Lifecycle{OnTimeout: sandbox.TimeoutPause, KeepMemory: true}, map[string]any{"onTimeout": "pause", "autoResume": false}},
		{"SDK 2.51 pause keepMemory false", map[string]any{"autoPause": true, "autoPauseMemory": false},
			sandbox.Lifecycle{OnTimeout: sandbox.TimeoutPause, KeepMemory: false}, map[string]any{"onTimeout": "pause", "autoResume": false}},
		{"pause with auto-resume", map[string]any{"autoPause": true, "autoResume": map[string]bool{"enabled": true}},
			sandbox.Lifecycle{OnTimeout: sandbox.TimeoutPause, KeepMemory: true, AutoResume: true}, map[string]any{"onTimeout": "pause", "autoResume": true}},
		{"auto-resume disabled", map[string]any{"autoPause": true, "autoResume": map[string]bool{"enabled": false}},
			sandbox.Lifecycle{OnTimeout: sandbox.TimeoutPause, KeepMemory: true}, map[string]any{"onTimeout": "pause", "autoResume": false}},
		{"autoPauseMemory alone", map[string]any{"autoPauseMemory": false},
			sandbox.Lifecycle{OnTimeout: sandbox.TimeoutKill, KeepMemory: false}, map[string]any{"onTimeout": "kill", "autoResume": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.body["templateID"] = "base"
			id := a.create(t, tc.body)["sandboxID"].(string)
			sb, err := a.m.Get(context.Background(), sandbox.DefaultTeamID, id)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, sb.Lifecycle); diff != "" {
				t.Errorf("lifecycle (-want +got):\n%s", diff)
			}
			var detail map[string]any
			a.do(t, "GET", "/sandboxes/"+id, nil).decode(t, &detail)
			if diff := cmp.Diff(tc.wantDetail, detail["lifecycle"]); diff != "" {
				t.Errorf("GET lifecycle (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRefreshAndNetworkByState: refreshes extend only running sandboxes
// (a paused one is 404, as for /timeout in E2B); PUT network also takes a
// paused sandbox's settings, to apply on resume.
func TestRefreshAndNetworkByState(t *testing.T) {
	a := newAPI(t)
	running := "/sandboxes/" + a.create(t, nil)["sandboxID"].(string)
	paused := "/sandboxes/" + a.create(t, nil)["sandboxID"].(string)
	if r := a.do(t, "POST", paused+"/pause", nil); r.status != http.StatusNoContent {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	rules := map[string]any{"allowOut": []string{"10.1.2.3"}, "denyOut": []string{"0.0.0.0/0"}}
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
	}{
		{"refresh running", "POST", running + "/refreshes", map[string]any{"duration": 60}, 204},
		{"refresh running without a body", "POST", running + "/refreshes", nil, 204},
		{"refresh paused", "POST", paused + "/refreshes", map[string]any{"duration": 60}, 404},
		{"refresh unknown", "POST", "/sandboxes/nosuch/refreshes", map[string]any{"duration": 60}, 404},
		{"refresh invalid ID", "POST", "/sandboxes/No_Such/refreshes", map[string]any{"duration": 60}, 400},
		{"refresh negative", "POST", running + "/refreshes", map[string]any{"duration": -1}, 400},
		{"network running", "PUT", running + "/network", rules, 204},
		{"network paused", "PUT", paused + "/network", rules, 204},
		{"network unknown", "PUT", "/sandboxes/nosuch/network", rules, 404},
		{"network invalid ID", "PUT", "/sandboxes/No_Such/network", rules, 400},
		{"network another team's", "PUT", running + "/network", rules, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := a.key
			if strings.Contains(tc.name, "another team") {
				key = a.otherKey
			}
			r := a.doKey(t, key, tc.method, tc.path, tc.body)
			if tc.status >= 400 {
				wantError(t, tc.name, r, tc.status)
			} else if r.status != tc.status {
				t.Errorf("status %d %s, want %d", r.status, r.body, tc.status)
			}
		})
	}
	var detail struct {
		State   string
		Network struct{ AllowOut, DenyOut []string }
	}
	a.do(t, "GET", paused, nil).decode(t, &detail)
	if detail.State != "paused" || !cmp.Equal(detail.Network.AllowOut, []string{"10.1.2.3"}) || !cmp.Equal(detail.Network.DenyOut, []string{"0.0.0.0/0"}) {
		t.Errorf("paused sandbox after PUT network: %+v", detail)
	}
}
