package secrets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store/sqlite"
)

// minter is a TokenMinter that says what it was asked for.
type minter struct {
	mu    sync.Mutex
	calls []string
	token string // "" = "tok:<aud>:<sandbox>:<team>"
}

func (m *minter) Mint(_ context.Context, aud, sandboxID, teamID string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	call := "tok:" + aud + ":" + sandboxID + ":" + teamID
	m.calls = append(m.calls, call)
	if m.token != "" {
		return m.token, nil
	}
	return call, nil
}

type fixture struct {
	svc   *Service
	st    *sqlite.DB
	dir   string
	mint  *minter
	stOpt Config
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{st: st, dir: dir, mint: &minter{}}
	f.stOpt = Config{Store: st, KeyFile: filepath.Join(dir, "secrets.key"), CreateKey: true, Sandboxes: st, Tokens: f.mint}
	if f.svc, err = New(f.stOpt); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) putSandbox(t testing.TB, sb sandbox.Sandbox) {
	t.Helper()
	if err := f.st.PutSandbox(context.Background(), sb); err != nil {
		t.Fatal(err)
	}
}

// TestSealedAtRest: the store holds no secret value in the clear, not
// in the database file nor in its write-ahead log.
func TestSealedAtRest(t *testing.T) {
	f := newFixture(t)
	const value = "plaintext-secret-value-4242"
	ctx := context.Background()
	sec, err := f.svc.Create(ctx, "default", "k", value, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Update(ctx, "default", sec.ID, value+"-2", nil); err != nil {
		t.Fatal(err)
	}
	stored, _ := f.st.GetSecret(ctx, "default", sec.ID)
	if bytes.Contains(stored.Sealed, []byte(value)) {
		t.Fatal("the stored value is not sealed")
	}
	files, _ := filepath.Glob(filepath.Join(f.dir, "warren.db*"))
	for _, file := range files {
		b, _ := os.ReadFile(file)
		if bytes.Contains(b, []byte(value)) {
			t.Errorf("%s holds the value in the clear", filepath.Base(file))
		}
	}
	if v, err := f.svc.Expand(ctx, "", "default", "${e2b.secrets.k}"); err != nil || v != value+"-2" {
		t.Errorf("Expand = %q, %v", v, err)
	}
}

// TestKeyFile: the key is made once (0600), read back by the next
// server, never replaced when it is bad, and a different key opens no
// secret sealed with the first.
func TestKeyFile(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.svc.Create(ctx, "default", "k", "v1", nil); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(f.stOpt.KeyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	again, err := New(f.stOpt)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := again.Expand(ctx, "", "default", "${e2b.secrets.k}"); err != nil || v != "v1" {
		t.Errorf("after a restart: %q, %v", v, err)
	}

	other := f.stOpt
	other.KeyFile, other.CreateKey = filepath.Join(f.dir, "other.key"), false
	if _, err := New(other); err == nil {
		t.Error("a missing key file without CreateKey is no error")
	}
	os.WriteFile(other.KeyFile, []byte(strings.Repeat("ab", 32)+"\n"), 0o600)
	wrong, err := New(other)
	if err != nil {
		t.Fatal(err)
	}
	v, err := wrong.Expand(ctx, "", "default", "${e2b.secrets.k}")
	if !errors.Is(err, errUnsealable) || isUnresolved(err) || v != "" {
		t.Errorf("another key: %q, %v; want an error to log", v, err)
	}

	os.WriteFile(other.KeyFile, []byte("not a key"), 0o600)
	other.CreateKey = true
	if _, err := New(other); err == nil || !strings.Contains(err.Error(), "openssl rand -hex 32") {
		t.Errorf("a bad key file: %v", err)
	}
	if b, _ := os.ReadFile(other.KeyFile); string(b) != "not a key" {
		t.Error("a bad key file was replaced")
	}
}

// TestExpand resolves secrets and tokens for one sandbox, and refuses,
// naming the placeholder, what does not resolve.
func TestExpand(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.svc.Create(ctx, "default", "Api-Key", "sk-1", nil)
	f.svc.Create(ctx, "other", "theirs", "sk-2", nil)
	f.putSandbox(t, sandbox.Sandbox{ID: "isb1", TeamID: "default", State: sandbox.StateRunning,
		IAM: sandbox.IAM{Tokens: map[string]sandbox.IAMToken{"aws": {Audience: "sts.amazonaws.com", TokenType: sandbox.TokenTypeJWTSVID}}}})
	f.putSandbox(t, sandbox.Sandbox{ID: "isb2", TeamID: "default", State: sandbox.StatePaused,
		IAM: sandbox.IAM{Tokens: map[string]sandbox.IAMToken{"aws": {Audience: "a", TokenType: sandbox.TokenTypeJWTSVID}}}})

	v, err := f.svc.Expand(ctx, "isb1", "default", "Bearer ${e2b.secrets.API-KEY} ${e2b.identity.tokens.aws} ${e2b.identity.tokens.aws}")
	if want := "Bearer sk-1 tok:sts.amazonaws.com:isb1:default tok:sts.amazonaws.com:isb1:default"; err != nil || v != want {
		t.Errorf("Expand = %q, %v; want %q", v, err, want)
	}
	if len(f.mint.calls) != 2 {
		t.Errorf("minted %d tokens for two placeholders", len(f.mint.calls))
	}
	if v, err := f.svc.Expand(ctx, "nosuch", "default", "no placeholder ${x}"); err != nil || v != "no placeholder ${x}" {
		t.Errorf("a plain value: %q, %v", v, err)
	}
	for _, c := range []struct {
		sandboxID, team, value, placeholder, reason string
	}{
		{"isb1", "default", "${e2b.secrets.missing}", "${e2b.secrets.missing}", "no secret"},
		{"isb1", "default", "${e2b.secrets.theirs}", "${e2b.secrets.theirs}", "no secret"},
		{"isb1", "default", "${e2b.identity.tokens.gcp}", "${e2b.identity.tokens.gcp}", "no token"},
		{"isb1", "other", "${e2b.identity.tokens.aws}", "${e2b.identity.tokens.aws}", "not found"},
		{"nosuch", "default", "${e2b.identity.tokens.aws}", "${e2b.identity.tokens.aws}", "not found"},
		{"isb2", "default", "${e2b.identity.tokens.aws}", "${e2b.identity.tokens.aws}", "paused"},
		{"isb1", "default", "${e2b.oops}", "", "neither"},
	} {
		v, err := f.svc.Expand(ctx, c.sandboxID, c.team, c.value)
		ue, ok := errors.AsType[*UnresolvedError](err)
		if !ok || ue.Placeholder != c.placeholder || !strings.Contains(ue.Reason, c.reason) || v != "" {
			t.Errorf("Expand(%s, %s, %q) = %q, %v; want an UnresolvedError for %q saying %q", c.sandboxID, c.team, c.value, v, err, c.placeholder, c.reason)
		}
		if ok && strings.Contains(ue.Error(), "sk-") {
			t.Errorf("the error shows a value: %v", ue)
		}
	}
	f.mint.token = "bad\r\ntoken"
	if _, err := f.svc.Expand(ctx, "isb1", "default", "${e2b.identity.tokens.aws}"); !isUnresolved(err) {
		t.Errorf("a token that is no header value: %v", err)
	}
	noTokens := f.stOpt
	noTokens.Tokens = nil
	svc, _ := New(noTokens)
	if _, err := svc.Expand(ctx, "isb1", "default", "${e2b.identity.tokens.aws}"); !isUnresolved(err) || !strings.Contains(err.Error(), "not enabled") {
		t.Errorf("without a minter: %v", err)
	}
}

func isUnresolved(err error) bool {
	_, ok := errors.AsType[*UnresolvedError](err)
	return ok
}

// TestUpdateRace: concurrent updates each get their own version, and
// the value that resolves is the last version's.
func TestUpdateRace(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	sec, _ := f.svc.Create(ctx, "default", "k", "v0", nil)
	const n = 6
	versions := make(chan int64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, err := f.svc.Update(ctx, "default", "k", "v"+string(rune('1'+i)), nil)
			if err != nil {
				t.Error(err)
				return
			}
			versions <- s.Version
		})
	}
	wg.Wait()
	close(versions)
	seen := map[int64]bool{}
	for v := range versions {
		if seen[v] {
			t.Errorf("version %d given twice", v)
		}
		seen[v] = true
	}
	got, _ := f.svc.Get(ctx, "default", sec.ID)
	if got.Version != n+1 {
		t.Errorf("version %d after %d updates", got.Version, n)
	}
	if _, err := f.svc.Expand(ctx, "", "default", "${e2b.secrets.k}"); err != nil {
		t.Errorf("the last version does not open: %v", err)
	}
}

// TestCheckRules: at create, a placeholder that cannot resolve is
// KindInvalid naming it.
func TestCheckRules(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.svc.Create(ctx, "default", "k", "v", nil)
	rules := func(v string) map[string][]sandbox.NetworkRule {
		return map[string][]sandbox.NetworkRule{"a.example.com": {{Headers: map[string]string{"A": v}}}}
	}
	iam := sandbox.IAM{Tokens: map[string]sandbox.IAMToken{"t": {Audience: "x", TokenType: sandbox.TokenTypeJWTSVID}}}
	if err := f.svc.CheckRules(ctx, "default", rules("${e2b.secrets.K} ${e2b.identity.tokens.t}"), iam); err != nil {
		t.Error(err)
	}
	for v, team := range map[string]string{"${e2b.secrets.k}": "other", "${e2b.secrets.nope}": "default", "${e2b.identity.tokens.u}": "default"} {
		err := f.svc.CheckRules(ctx, team, rules(v), iam)
		if sandbox.KindOf(err) != sandbox.KindInvalid || !strings.Contains(err.Error(), v) {
			t.Errorf("CheckRules(%s, %s) = %v", team, v, err)
		}
	}
}

// TestChanged: Create, Update and Delete tell Config.Changed of the team,
// once the store holds the change; a failed change tells nothing.
func TestChanged(t *testing.T) {
	f := newFixture(t)
	var told []string
	f.svc.cfg.Changed = func(ctx context.Context, team string) {
		sec, err := f.svc.Get(ctx, team, "k")
		told = append(told, fmt.Sprintf("%s:%s:%v", team, sec.Name, sandbox.KindOf(err) == sandbox.KindNotFound))
	}
	ctx := t.Context()
	if _, err := f.svc.Create(ctx, "t1", "k", "v1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Update(ctx, "t1", "k", "v2", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Create(ctx, "t1", "k", "again", nil); err == nil {
		t.Fatal("made a second secret k")
	}
	if err := f.svc.Delete(ctx, "t1", "k"); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Delete(ctx, "t1", "k"); err == nil {
		t.Fatal("deleted k twice")
	}
	want := []string{"t1:k:false", "t1:k:false", "t1::true"}
	if strings.Join(told, ",") != strings.Join(want, ",") {
		t.Errorf("told %v, want %v", told, want)
	}
}
