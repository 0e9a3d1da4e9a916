package isolation

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// TestBuildIsolation: a template build's RUN step, which the engine's
// classic builder runs with NET_RAW and its other default capabilities,
// runs on the build network the firewall covers: it reaches no port of
// the host on any of the host's addresses (a listener on 0.0.0.0 that the
// host itself reaches at each) and no sandbox.
func TestBuildIsolation(t *testing.T) {
	e := newEnv(t)
	if e.image != "warren/base" {
		t.Skip("skipping: a build step needs a shell, from warren/base (bin/warren image build)")
	}
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	var targets []string
	addrs, _ := net.InterfaceAddrs() // of interfaces up or down: the build bridge is down between builds
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
			addr := net.JoinHostPort(ip.IP.String(), fmt.Sprint(port))
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				t.Fatalf("control: the host cannot reach its own listener at %s: %v", addr, err)
			}
			c.Close()
			targets = append(targets, addr)
		}
	}
	for accepted.Load() < int32(len(targets)) {
		time.Sleep(10 * time.Millisecond)
	}
	accepted.Store(0)
	b := e.create(t, open())
	targets = append(targets, e.serve(t, b, "8080"))

	var script strings.Builder
	for _, a := range targets {
		fmt.Fprintf(&script, `echo "dial %s: $(/probe dial %s)"; `, a, a)
	}
	bin, err := os.ReadFile(e.probe)
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := "FROM " + e.image + "\nCOPY probe /probe\nRUN " + script.String() + "true\n"
	var ctxTar bytes.Buffer
	tw := tar.NewWriter(&ctxTar)
	for name, body := range map[string][]byte{"Dockerfile": []byte(dockerfile), "probe": bin} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(body)), ModTime: time.Now()})
		tw.Write(body)
	}
	tw.Close()

	d := e.rt.Builder(e.buildNet)
	tag := "warren-isolation-build:" + randomHex(6)
	t.Cleanup(func() { e.cli.ImageRemove(context.Background(), tag, client.ImageRemoveOptions{Force: true}) })
	var out []string
	if err := d.Build(t.Context(), &ctxTar, tag, true, func(l string) { out = append(out, l) }); err != nil {
		t.Fatalf("build: %v\n%s", err, strings.Join(out, "\n"))
	}
	log := strings.Join(out, "\n")
	for _, a := range targets {
		switch {
		case !strings.Contains(log, "dial "+a+": "):
			t.Errorf("no result for %s:\n%s", a, log)
		case strings.Contains(log, "dial "+a+": ok"):
			t.Errorf("a build step reached %s", a)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host listener accepted %d connections from the build", n)
	}
}
