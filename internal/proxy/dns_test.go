package proxy

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"
)

func TestDNS(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- NewDNS("Warren.Test:3000", nil).Serve(ctx, pc) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after cancel")
		}
	}()

	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
	tests := []struct {
		name string
		want []string // nil = lookup fails
	}{
		{"49983-isbx1.warren.test", []string{"127.0.0.1", "::1"}},
		{"8080-ABC.Warren.Test", []string{"127.0.0.1", "::1"}},
		{"warren.test", []string{"127.0.0.1", "::1"}},
		{"example.com", nil},
		{"notwarren.test", nil},
	}
	for _, tc := range tests {
		lctx, lcancel := context.WithTimeout(ctx, 3*time.Second)
		addrs, err := r.LookupHost(lctx, tc.name)
		lcancel()
		slices.Sort(addrs)
		if tc.want == nil {
			if err == nil {
				t.Errorf("%s resolved to %v, want a failure", tc.name, addrs)
			}
			continue
		}
		if err != nil || !slices.Equal(addrs, tc.want) {
			t.Errorf("%s = %v, %v; want %v", tc.name, addrs, err, tc.want)
		}
	}
}
