package server

import (
	"io"
	"net/http"
	"net/http/httptrace"
	"testing"
)

// A draining server answers a call sent on a connection kept idle since
// before the drain (closing it then would cut such a call), and closes
// each connection after its answer.
func TestDrainClosesAfterTheAnswer(t *testing.T) {
	srv := openTest(t, nil)
	client := &http.Client{Transport: &http.Transport{}}
	get := func() (reused, closed bool) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL()+"/health", nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
		}))
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("a call while draining: %v", err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return reused, res.Close
	}
	if _, closed := get(); closed {
		t.Fatal("the connection closed before the drain")
	}
	srv.Drain()
	if reused, closed := get(); !reused || !closed {
		t.Errorf("after the drain: sent on the kept connection %v (want true), answer closing it %v (want true)", reused, closed)
	}
	if reused, closed := get(); reused || !closed {
		t.Errorf("next: a new connection %v, closed after its answer %v; want both", !reused, closed)
	}
}
