package nodeagent

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/sandbox"
)

const (
	uid   = "0f0e0d0c-0b0a-4908-8706-050403020100"
	token = "0123456789abcdef0123456789abcdef"
)

// write creates a file and its directories under root.
func write(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// v1Tree is a cgroup v1 root with the pod under a per-node root and its QoS
// class, as the test cluster's kubelets lay it out (cgroupfs driver).
func v1Tree(t *testing.T) string {
	root := t.TempDir()
	pod := "node-b/kubepods/burstable/pod" + uid
	write(t, root, "freezer/node-a/kubepods/besteffort/podother/freezer.state", "THAWED")
	write(t, root, "freezer/"+pod+"/freezer.state", "THAWED")
	write(t, root, "pids/"+pod+"/pids.max", "max")
	write(t, root, "cpu,cpuacct/"+pod+"/cpuacct.usage", "123456789")
	write(t, root, "memory/"+pod+"/memory.usage_in_bytes", "10485760")
	write(t, root, "memory/"+pod+"/memory.limit_in_bytes", "536870912")
	write(t, root, "memory/"+pod+"/memory.stat", "cache 999\ntotal_cache 4194304\ntotal_inactive_file 2097152\n")
	return root
}

// newTestServer is a node agent on a v1Tree of its own, taking token.
func newTestServer(t *testing.T) *Server {
	t.Helper()
	cg, err := NewCgroups(v1Tree(t))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(cg, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

// v2Tree is a cgroup v2 root with the pod as the systemd driver names it.
func v2Tree(t *testing.T) string {
	root := t.TempDir()
	pod := "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
	write(t, root, "cgroup.controllers", "cpu memory pids")
	write(t, root, pod+"/cgroup.freeze", "0")
	// A file cannot change by itself: the test's cgroup reports frozen
	// already, as the kernel would once the write took effect.
	write(t, root, pod+"/cgroup.events", "populated 1\nfrozen 1\n")
	write(t, root, pod+"/pids.max", "max")
	write(t, root, pod+"/cpu.stat", "usage_usec 5000\nuser_usec 3000\n")
	write(t, root, pod+"/memory.current", "8388608")
	write(t, root, pod+"/memory.max", "max")
	write(t, root, pod+"/memory.stat", "anon 100\nfile 3145728\ninactive_file 1048576\n")
	return root
}

func TestCgroupV1FreezePidsAndStats(t *testing.T) {
	root := v1Tree(t)
	cg, err := NewCgroups(root)
	if err != nil {
		t.Fatal(err)
	}
	pod := "node-b/kubepods/burstable/pod" + uid
	if err := cg.Freeze(t.Context(), uid); err != nil {
		t.Fatal(err)
	}
	if got := read(t, root, "freezer/"+pod+"/freezer.state"); got != "FROZEN" {
		t.Errorf("freezer.state %q", got)
	}
	if got := read(t, root, "freezer/node-a/kubepods/besteffort/podother/freezer.state"); got != "THAWED" {
		t.Errorf("another pod's freezer.state %q", got)
	}
	if f, err := cg.Frozen(uid); err != nil || !f {
		t.Errorf("Frozen: %v, %v", f, err)
	}
	if err := cg.Thaw(t.Context(), uid); err != nil {
		t.Fatal(err)
	}
	if got := read(t, root, "freezer/"+pod+"/freezer.state"); got != "THAWED" {
		t.Errorf("freezer.state %q after thaw", got)
	}
	write(t, root, "pids/"+pod+"/ctr-sandbox/pids.max", "max")
	if err := cg.SetPidsLimit(uid, 256); err != nil {
		t.Fatal(err)
	}
	if got := read(t, root, "pids/"+pod+"/pids.max"); got != "257" {
		t.Errorf("the pod's pids.max %q, want the cap and its pause process", got)
	}
	if got := read(t, root, "pids/"+pod+"/ctr-sandbox/pids.max"); got != "256" {
		t.Errorf("the container's pids.max %q, want the pod's cap it sees", got)
	}
	s, err := cg.Stats(uid)
	if err != nil {
		t.Fatal(err)
	}
	if s != (Stats{CPUNanos: 123456789, MemUsed: 8 << 20, MemLimit: 512 << 20, MemCache: 4 << 20}) {
		t.Errorf("stats %+v", s)
	}
}

func TestCgroupV2FreezePidsAndStats(t *testing.T) {
	root := v2Tree(t)
	cg, err := NewCgroups(root)
	if err != nil {
		t.Fatal(err)
	}
	pod := "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
	if err := cg.Freeze(t.Context(), uid); err != nil {
		t.Fatal(err)
	}
	if got := read(t, root, pod+"/cgroup.freeze"); got != "1" {
		t.Errorf("cgroup.freeze %q", got)
	}
	write(t, root, pod+"/cri-containerd-sandbox.scope/pids.max", "max")
	if err := cg.SetPidsLimit(uid, 64); err != nil {
		t.Fatal(err)
	}
	if got := read(t, root, pod+"/pids.max"); got != "65" {
		t.Errorf("the pod's pids.max %q, want the cap and its pause process", got)
	}
	if got := read(t, root, pod+"/cri-containerd-sandbox.scope/pids.max"); got != "64" {
		t.Errorf("the container's pids.max %q, want the pod's cap it sees", got)
	}
	s, err := cg.Stats(uid)
	if err != nil {
		t.Fatal(err)
	}
	if s != (Stats{CPUNanos: 5000000, MemUsed: 7 << 20, MemCache: 3 << 20}) {
		t.Errorf("stats %+v", s)
	}
}

func TestCgroupsRefuseWhatIsNotAPodUID(t *testing.T) {
	cg, err := NewCgroups(v1Tree(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "..", "../../etc", "pod" + uid, uid + "/..", strings.ToUpper(uid)} {
		if err := cg.Freeze(t.Context(), bad); sandbox.KindOf(err) != sandbox.KindInvalid {
			t.Errorf("Freeze(%q): %v", bad, err)
		}
	}
	if err := cg.Freeze(t.Context(), "11111111-2222-4333-8444-555555555555"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("unknown pod: %v", err)
	}
	if _, err := NewCgroups(t.TempDir()); err == nil {
		t.Error("an empty directory taken for a cgroup root")
	}
}

func TestServerNeedsTheToken(t *testing.T) {
	cg, err := NewCgroups(v1Tree(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewServer(cg, "short", nil); err == nil {
		t.Error("a short token accepted")
	}
	srv, err := NewServer(cg, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := tlsServer(t, srv)
	defer ts.Close()
	addr := strings.TrimPrefix(ts.URL, "https://")

	for name, tok := range map[string]string{"none": "", "wrong": strings.Repeat("x", 32), "prefix": token[:31]} {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/pods/"+uid+"/freeze", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := testClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("token %s: %d", name, res.StatusCode)
		}
	}
	if f, _ := cg.Frozen(uid); f {
		t.Fatal("frozen without the token")
	}

	c := NewClient(token)
	if err := c.Freeze(t.Context(), addr, uid); err != nil {
		t.Fatal(err)
	}
	if f, err := c.Frozen(t.Context(), addr, uid); err != nil || !f {
		t.Errorf("Frozen: %v, %v", f, err)
	}
	if err := c.Thaw(t.Context(), addr, uid); err != nil {
		t.Fatal(err)
	}
	if err := c.SetPidsLimit(t.Context(), addr, uid, 0); sandbox.KindOf(err) != sandbox.KindInvalid {
		t.Errorf("limit 0: %v", err)
	}
	if err := c.SpareAgent(t.Context(), addr, uid); sandbox.KindOf(err) != sandbox.KindUnavailable {
		t.Errorf("SpareAgent on a pod with no process: %v", err)
	}
	if s, err := c.Stats(t.Context(), addr, uid); err != nil || s.CPUNanos != 123456789 {
		t.Errorf("Stats: %+v, %v", s, err)
	}
	if err := c.Freeze(t.Context(), addr, "11111111-2222-4333-8444-555555555555"); sandbox.KindOf(err) != sandbox.KindNotFound {
		t.Errorf("unknown pod: %v", err)
	}

	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/pods/..%2F..%2Fetc/freeze", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("a path for a UID: %d", res.StatusCode)
	}
	res, err = testClient.Get(ts.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Errorf("healthz: %d", res.StatusCode)
	}
}

// FuzzServer: whatever path and body a caller with the token sends, the
// agent answers without panicking and changes no cgroup but the pod's.
func FuzzServer(f *testing.F) {
	f.Add("POST", "/v1/pods/"+uid+"/freeze", "")
	f.Add("PUT", "/v1/pods/"+uid+"/pids-limit", `{"limit":5}`)
	f.Add("PUT", "/v1/pods/"+uid+"/pids-limit", `{"limit":-1}`)
	f.Add("GET", "/v1/pods/../stats", "")
	f.Fuzz(func(t *testing.T, method, path, body string) {
		root := v1Tree(t)
		cg, err := NewCgroups(root)
		if err != nil {
			t.Fatal(err)
		}
		srv, _ := NewServer(cg, token, nil)
		req, err := http.NewRequest(method, "http://node"+path, strings.NewReader(body))
		if err != nil || !strings.HasPrefix(req.URL.Path, "/") {
			return
		}
		req.Header.Set("Authorization", "Bearer "+token)
		srv.ServeHTTP(httptest.NewRecorder(), req)
		if got := read(t, root, "freezer/node-a/kubepods/besteffort/podother/freezer.state"); got != "THAWED" {
			t.Errorf("%s %s changed another pod", method, path)
		}
	})
}
