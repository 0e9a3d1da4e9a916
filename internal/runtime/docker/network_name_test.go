package docker

import (
	"strings"
	"testing"
)

// A new network's bridge is never named after an interface the host has
// already: the loopback is one every host has.
func TestBridgeNameFree(t *testing.T) {
	err := bridgeNameFree("lo", "sandbox")
	if err == nil || !strings.Contains(err.Error(), `"lo"`) || !strings.Contains(err.Error(), "--network") {
		t.Errorf("bridge named after the host's lo: err = %v, want a refusal naming it and the flag", err)
	}
	if err := bridgeNameFree("wrn-no-such-if", "sandbox"); err != nil {
		t.Errorf("a name no interface has: %v", err)
	}
}
