package lifecycle

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/warrenhq/warren/internal/sandbox"
)

// eventLog is an EventRecorder that keeps the events it is told were
// stored.
type eventLog struct {
	mu  sync.Mutex // guards evs
	evs []sandbox.Event
}

func (l *eventLog) Prepare(ctx context.Context, ev sandbox.Event) sandbox.Recorded {
	ev.ID = uuid.NewString()
	return sandbox.Recorded{Event: ev}
}

func (l *eventLog) Stored(evs ...sandbox.Recorded) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range evs {
		l.evs = append(l.evs, ev.Event)
	}
}

func (l *eventLog) of(id string) []sandbox.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []sandbox.Event
	for _, ev := range l.evs {
		if ev.SandboxID == id {
			out = append(out, ev)
		}
	}
	return out
}

// Every change of a sandbox's life is an event, with its team, template,
// metadata and run; a resume starts a new run.
func TestLifecycleEvents(t *testing.T) {
	log := &eventLog{}
	e := newEnv(t, func(c *config) { c.Events = log })
	ctx := context.Background()
	sb := e.create(t, CreateRequest{Template: "base", Timeout: time.Hour, Metadata: map[string]string{"k": "v"}})
	if err := e.m.SetTimeout(ctx, team, sb.ID, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Pause(ctx, team, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.m.Connect(ctx, team, sb.ID, time.Minute, true); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Kill(ctx, team, sb.ID); err != nil {
		t.Fatal(err)
	}
	evs := log.of(sb.ID)
	var types []sandbox.EventType
	for _, ev := range evs {
		types = append(types, ev.Type)
	}
	want := []sandbox.EventType{sandbox.EventCreated, sandbox.EventUpdated, sandbox.EventPaused, sandbox.EventResumed, sandbox.EventKilled}
	if !slices.Equal(types, want) {
		t.Fatalf("events %v, want %v", types, want)
	}
	for _, ev := range evs {
		if ev.TeamID != team || ev.TemplateID != "base" || ev.ExecutionID == "" || ev.Time.IsZero() {
			t.Errorf("%s: %+v", ev.Type, ev)
		}
		if md, _ := ev.Data["sandbox_metadata"].(map[string]string); md["k"] != "v" {
			t.Errorf("%s: sandbox_metadata %v", ev.Type, ev.Data["sandbox_metadata"])
		}
	}
	if _, ok := evs[1].Data["set_timeout"].(string); !ok {
		t.Errorf("update without set_timeout: %v", evs[1].Data)
	}
	if evs[2].Data["pause_mode"] != string(sandbox.PauseFrozen) {
		t.Errorf("pause event data %v", evs[2].Data)
	}
	if evs[0].ExecutionID != evs[2].ExecutionID || evs[3].ExecutionID == evs[2].ExecutionID || evs[4].ExecutionID != evs[3].ExecutionID {
		t.Errorf("execution IDs %s %s %s %s: a run ends at a pause, another starts at the resume",
			evs[0].ExecutionID, evs[2].ExecutionID, evs[3].ExecutionID, evs[4].ExecutionID)
	}
}
