package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/sandbox"
)

// A full server answers a create 503 in E2B's error shape with a
// Retry-After, before anything starts.
func TestCreateOnFullServer(t *testing.T) {
	key := sandbox.NewAPIKey()
	srv := openTest(t, func(c *Config) {
		c.APIKey = key
		c.Lifecycle.MemoryMB, c.Lifecycle.ServerMemoryMB = 512, 1000
	})
	create := func() *http.Response {
		req, _ := http.NewRequest("POST", srv.URL()+"/sandboxes", strings.NewReader(`{"templateID":"base","timeout":60}`))
		req.Header.Set("X-API-Key", key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		return res
	}
	if res := create(); res.StatusCode != http.StatusCreated {
		t.Fatalf("first create: %d, want 201", res.StatusCode)
	}
	res := create()
	var body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	json.NewDecoder(res.Body).Decode(&body)
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "10" || body.Code != 503 ||
		body.Message != "this server is full: its sandboxes reserve 512 of its 1000 MiB of memory, and this one needs 512" {
		t.Errorf("create on a full server: %d, Retry-After %q, %+v", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
}
