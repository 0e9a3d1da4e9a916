package users

import (
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

func TestForRequest(t *testing.T) {
	basic := func(name string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(name+":"))
	}
	tests := []struct {
		name, auth, defaultUser string
		want                    string // "" means an error
	}{
		{"named in basic auth", basic("root"), "nobody-here", "root"},
		{"default when none named", "", "root", "root"},
		{"other schemes are ignored", "Bearer abc", "root", "root"},
		{"unknown user", basic("no-such-user-xyz"), "root", ""},
		{"unknown default", "", "no-such-user-xyz", ""},
		{"malformed basic auth", "Basic %%%", "root", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.auth != "" {
				h.Set("Authorization", tt.auth)
			}
			u, err := ForRequest(h, tt.defaultUser)
			switch {
			case tt.want == "" && err == nil:
				t.Fatalf("ForRequest = %q, want an error", u.Name)
			case tt.want != "" && err != nil:
				t.Fatalf("ForRequest: %v", err)
			case tt.want != "" && u.Name != tt.want:
				t.Errorf("ForRequest = %q, want %q", u.Name, tt.want)
			}
		})
	}
}

func TestLookupCache(t *testing.T) {
	dir := t.TempDir()
	files := [2]string{filepath.Join(dir, "passwd"), filepath.Join(dir, "group")}
	for _, f := range files {
		if err := os.WriteFile(f, []byte("v1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	saved := accountFiles
	accountFiles = files
	t.Cleanup(func() { accountFiles = saved })

	cached := func() bool {
		cache.Lock()
		defer cache.Unlock()
		_, ok := cache.users["root"]
		return ok
	}
	u, err := Lookup("root")
	if err != nil || u.UID != 0 {
		t.Fatalf("Lookup(root) = %+v, %v", u, err)
	}
	if !cached() {
		t.Fatal("root is not remembered")
	}
	u.Groups[0] = 4242 // a caller's change must not reach the cache
	if again, _ := Lookup("root"); again.Groups[0] == 4242 {
		t.Error("the cache hands out its own slices")
	}
	// A change to the group file (a new membership, say) drops what was remembered.
	if err := os.WriteFile(files[1], []byte("v2, longer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if currentIDsMatchCache() {
		t.Fatal("the file change went unnoticed")
	}
	if _, err := Lookup("root"); err != nil || !cached() {
		t.Fatalf("Lookup after the change: %v", err)
	}
	// Without the files nothing is remembered.
	os.Remove(files[0])
	if _, err := Lookup("root"); err != nil || cached() {
		t.Errorf("Lookup without an account file: %v, cached %v", err, cached())
	}
}

// currentIDsMatchCache reports whether the cache is of the files as they are.
func currentIDsMatchCache() bool {
	ids, _ := currentIDs()
	cache.Lock()
	defer cache.Unlock()
	return ids == cache.ids
}
