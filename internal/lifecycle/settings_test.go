package lifecycle

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/runtime/fake"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

// No zero stands for a default: each setting's zero is either refused,
// naming the setting, or means what its doc says (no pool, no pause to
// disk, no team limits, no limit of the memory all sandboxes reserve).
func TestSettingsZeroes(t *testing.T) {
	if err := DefaultSettings().Validate(); err != nil {
		t.Fatalf("DefaultSettings: %v", err)
	}
	meaningful := map[string]bool{"WarmPool": true, "WarmPoolCodeInterpreter": true, "PauseToDisk": true, "TeamLimits": true, "ServerMemoryMB": true}
	typ := reflect.TypeFor[Settings]()
	for i := range typ.NumField() {
		field := typ.Field(i).Name
		t.Run(field, func(t *testing.T) {
			s := DefaultSettings()
			v := reflect.ValueOf(&s).Elem().Field(i)
			v.SetZero()
			err := s.Validate()
			if meaningful[field] {
				if err != nil {
					t.Errorf("zero %s: %v, want accepted", field, err)
				}
				return
			}
			want := strings.ToLower(field)
			if field == "SandboxRuntime" {
				want = "runtime" // serve's --runtime
			}
			var se *SettingError
			if !errors.As(err, &se) || strings.ReplaceAll(se.Name, "-", "") != want {
				t.Errorf("zero %s: %v, want a SettingError naming it", field, err)
			}
		})
	}
}

func TestSettingsValidate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*Settings)
		want   string // "" = accepted
	}{
		{"no frozen cap", func(s *Settings) { s.MaxFrozen = -1 }, ""},
		{"never demote", func(s *Settings) { s.FreezeMaxAge, s.StoppedMaxAge, s.CheckpointMaxAge = -1, -1, -1 }, ""},
		{"no pids limit", func(s *Settings) { s.PidsLimit = -1 }, ""},
		{"gvisor", func(s *Settings) { s.SandboxRuntime = sandbox.RuntimeGVisor }, ""},
		{"negative pool", func(s *Settings) { s.WarmPool = -2 }, "setting warm-pool must not be negative: give a size, 0 for none, or auto"},
		{"zero cap", func(s *Settings) { s.MaxFrozen = 0 }, "setting max-frozen must not be 0: give a positive value, or a negative one for never"},
		{"negative memory", func(s *Settings) { s.MemoryMB = -512 }, "setting memory-mb must be positive"},
		{"negative retention", func(s *Settings) { s.KilledRetention = -1 }, "setting killed-retention must be positive"},
		{"unknown runtime", func(s *Settings) { s.SandboxRuntime = "kata" }, `setting runtime must be runc or gvisor, not "kata"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := DefaultSettings()
			tt.change(&s)
			err := s.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate: %v, want %q", err, tt.want)
			}
		})
	}
}

// New takes Settings as given: a zero Settings is refused, saying where
// the defaults are, rather than run with defaults of its own.
func TestNewRefusesZeroSettings(t *testing.T) {
	deps := Deps{Runtime: fake.New(), Agent: fake.NewAgent(), Store: nil}
	if _, err := New(deps, DefaultSettings()); err == nil {
		t.Error("New without a Store succeeded")
	}
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	deps.Store = st
	_, err = New(deps, Settings{})
	if err == nil || !strings.Contains(err.Error(), "DefaultSettings") {
		t.Errorf("New with zero Settings: %v, want an error pointing to DefaultSettings", err)
	}
}
