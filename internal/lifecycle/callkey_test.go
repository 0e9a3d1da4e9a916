package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/sandbox"
)

// A create sent again under the same call key (its first try's leader was
// lost during it) returns the sandbox the first try made, not a second;
// once that sandbox is killed, the key makes a new one; another key, or
// none, makes its own.
func TestCreateUnderCallKey(t *testing.T) {
	e := newEnv(t, nil)
	req := CreateRequest{TeamID: team, Template: "base", Timeout: 5 * time.Minute}
	create := func(key string) sandbox.Sandbox {
		t.Helper()
		sb, err := e.m.Create(WithCallKey(context.Background(), key), req)
		if err != nil {
			t.Fatalf("create under %q: %v", key, err)
		}
		return sb
	}
	first := create("k1")
	if first.ID != sandbox.IDForKey("k1") {
		t.Errorf("keyed sandbox %s, want the key's ID %s", first.ID, sandbox.IDForKey("k1"))
	}
	if again := create("k1"); again.ID != first.ID || again.EnvdAccessToken != first.EnvdAccessToken || again.TrafficAccessToken != first.TrafficAccessToken {
		t.Errorf("the create sent again made %+v, want the first try's %s", again, first.ID)
	}
	if other := create("k2"); other.ID == first.ID {
		t.Error("another key returned the first key's sandbox")
	}
	if plain := create(""); plain.ID == first.ID {
		t.Error("a create without a key returned a keyed sandbox")
	}
	if list, _, err := e.m.List(context.Background(), ListRequest{TeamID: team}); err != nil || len(list) != 3 {
		t.Errorf("%d sandboxes listed (%v), want 3", len(list), err)
	}
	if err := e.m.Kill(context.Background(), team, first.ID); err != nil {
		t.Fatal(err)
	}
	if after := create("k1"); after.ID == first.ID || after.State != sandbox.StateRunning {
		t.Errorf("after the kill the key gave %s (%s), want a new running sandbox", after.ID, after.State)
	}
	// Another team's create under the same key is no retry of this one.
	other := req
	other.TeamID = "other-team"
	if sb, err := e.m.Create(WithCallKey(context.Background(), "k2"), other); err == nil && sb.TeamID != "other-team" {
		t.Errorf("another team's create got %s of team %s", sb.ID, sb.TeamID)
	}
}
