package filesystem

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// TestMkdirAllAsConcurrently: when MkdirAllAs returns, every directory on
// the way is its user's, also when another call made it at the same time
// (several files written at once into one new directory).
func TestMkdirAllAsConcurrently(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it hands directories to another user")
	}
	const uid, gid = 65534, 65534
	root := t.TempDir()
	for round := range 200 {
		dir := filepath.Join(root, fmt.Sprint(round), "a", "b")
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				if _, err := MkdirAllAs(dir, uid, gid); err != nil {
					errs[i] = err
					return
				}
				for p := dir; p != root; p = filepath.Dir(p) {
					fi, err := os.Stat(p)
					if err != nil {
						errs[i] = err
						return
					}
					if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid {
						errs[i] = fmt.Errorf("%s is %d:%d when MkdirAllAs returned, want %d:%d", p, st.Uid, st.Gid, uid, gid)
						return
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}
