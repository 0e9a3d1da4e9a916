package proxy_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/agentclient"
	"github.com/warrenhq/warren/internal/proxy"
	"github.com/warrenhq/warren/internal/runtime/docker"
	"github.com/warrenhq/warren/internal/sandbox"
)

type oneRouter struct{ sb sandbox.Sandbox }

func (r oneRouter) Route(context.Context, string) (sandbox.Sandbox, error) { return r.sb, nil }

func TestZZSmoke(t *testing.T) {
	rt, err := docker.New(docker.Config{AgentPath: "/tmp/warren-agent", ManagedValue: "smoke"})
	if err != nil {
		t.Fatal(err)
	}
	ac := agentclient.New()
	var lat []time.Duration
	for i := range 8 {
		id := sandbox.NewID()
		t0 := time.Now()
		c, err := rt.Create(t.Context(), sandbox.ContainerSpec{SandboxID: id, Image: "warren-smoke-empty:1", AgentSecret: "sec", CPUCount: 2, MemoryMB: 512, PidsLimit: 4096})
		if err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		for ac.Health(t.Context(), c.AgentAddr) != nil {
			time.Sleep(2 * time.Millisecond)
		}
		t.Logf("create %v health %v", t1.Sub(t0), time.Since(t1))
		ictx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		err = ac.Init(ictx, c.AgentAddr, sandbox.AgentInit{AccessToken: "tok", DefaultUser: "user"})
		cancel()
		lat = append(lat, time.Since(t0))
		if err != nil {
			out, _ := rt.Inspect(context.Background(), c.ID)
			t.Fatalf("init: %v %+v", err, out)
		}
		if i == 0 {
			conn, err := ac.DialTunnel(t.Context(), c.AgentAddr, "sec", 49983)
			if err != nil {
				t.Fatalf("tunnel: %v", err)
			}
			io.WriteString(conn, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			b, _ := io.ReadAll(conn)
			t.Logf("tunnel to 49983 inside: %q", string(b[:min(len(b), 40)]))
			p, _ := proxy.New(proxy.Config{Domain: "warren.test", Router: oneRouter{sandbox.Sandbox{ID: id, AgentAddr: c.AgentAddr, AgentSecret: "sec"}}, Tunnels: ac})
			front := httptest.NewServer(p)
			for _, host := range []string{"49983-" + id + ".warren.test", "8080-" + id + ".warren.test"} {
				req, _ := http.NewRequest("GET", front.URL+"/health", nil)
				req.Host = host
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				t.Logf("proxy %s: %d %s", host, resp.StatusCode, b)
			}
			front.Close()
		}
		rt.Remove(context.Background(), c.ID)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("create+init: p50 %v max %v all %v", lat[len(lat)/2], lat[len(lat)-1], lat)
}
