package filesystem

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/warrentest"
	pb "github.com/warrenhq/warren/proto/filesystem"
)

// TestRPCsActAsTheUser: every RPC reaches only what its user could reach
// in a shell, symlinks included, and root still reaches everything.
func TestRPCsActAsTheUser(t *testing.T) {
	warrentest.RequireRoot(t, "the agent chowns to another user, which only root may do")
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user 'nobody' on this system")
	}
	f := newFixture(t)
	warrentest.GiveDir(t, f.dir, nobody)
	// Root's corner beside the user's directory: a 0700 directory with a
	// file in it, and a root-only file.
	top := filepath.Dir(f.dir)
	closed := filepath.Join(top, "closed")
	warrentest.WriteFile(t, filepath.Join(closed, "inside"), "x")
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(top, "secret")
	warrentest.WriteFile(t, secret, "root only")
	if err := os.Chmod(secret, 0o600); err != nil {
		t.Fatal(err)
	}
	// The user's links into it.
	linkDir := filepath.Join(f.dir, "to-closed")
	if err := os.Symlink(closed, linkDir); err != nil {
		t.Fatal(err)
	}
	linkFile := filepath.Join(f.dir, "to-secret")
	if err := os.Symlink(secret, linkFile); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	denied := func(t *testing.T, err error) {
		t.Helper()
		wantCode(t, err, connect.CodePermissionDenied, "")
	}
	for _, who := range []string{"nobody", "root"} {
		t.Run(who, func(t *testing.T) {
			check := func(t *testing.T, err error) {
				t.Helper()
				if who == "nobody" {
					denied(t, err)
				} else if err != nil {
					t.Fatal(err)
				}
			}
			t.Run("stat inside a closed directory", func(t *testing.T) {
				_, err := f.client.Stat(ctx, as(&pb.StatRequest{Path: filepath.Join(closed, "inside")}, who))
				check(t, err)
			})
			t.Run("list a closed directory through a symlink", func(t *testing.T) {
				_, err := f.client.ListDir(ctx, as(&pb.ListDirRequest{Path: linkDir}, who))
				check(t, err)
			})
			t.Run("make a directory inside a closed one", func(t *testing.T) {
				_, err := f.client.MakeDir(ctx, as(&pb.MakeDirRequest{Path: filepath.Join(linkDir, "made-by-"+who)}, who))
				check(t, err)
			})
			t.Run("move a root file out of a closed directory", func(t *testing.T) {
				src := filepath.Join(closed, "inside")
				dst := filepath.Join(f.dir, "taken-by-"+who)
				_, err := f.client.Move(ctx, as(&pb.MoveRequest{Source: src, Destination: dst}, who))
				check(t, err)
				if err == nil { // put it back for the next user
					if err := os.Rename(dst, src); err != nil {
						t.Fatal(err)
					}
				}
			})
			t.Run("watch a closed directory through a symlink", func(t *testing.T) {
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				stream, err := f.client.WatchDir(wctx, as(&pb.WatchDirRequest{Path: linkDir}, who))
				if err == nil {
					stream.Receive()
					err = stream.Err()
					stream.Close()
				}
				check(t, err)
			})
			t.Run("create a polling watcher on a closed directory", func(t *testing.T) {
				_, err := f.client.CreateWatcher(ctx, as(&pb.CreateWatcherRequest{Path: closed}, who))
				check(t, err)
			})
		})
	}
	// Removal last: root's succeeds.
	_, err = f.client.Remove(ctx, as(&pb.RemoveRequest{Path: filepath.Join(closed, "inside")}, "nobody"))
	denied(t, err)
	_, err = f.client.Remove(ctx, as(&pb.RemoveRequest{Path: secret}, "nobody"))
	denied(t, err)
	if b, err := os.ReadFile(secret); err != nil || string(b) != "root only" {
		t.Fatalf("secret is now %q (%v)", b, err)
	}
	// The user's own corner works as before.
	mine := filepath.Join(f.dir, "mine", "deep")
	if _, err := f.client.MakeDir(ctx, as(&pb.MakeDirRequest{Path: mine}, "nobody")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Move(ctx, as(&pb.MoveRequest{Source: mine, Destination: mine + "2"}, "nobody")); err != nil {
		t.Fatal(err)
	}
	res, err := f.client.ListDir(ctx, as(&pb.ListDirRequest{Path: f.dir, Depth: 2}, "nobody"))
	if err != nil || len(res.Msg.GetEntries()) == 0 {
		t.Fatalf("list own directory: %v", err)
	}
	if _, err := f.client.Remove(ctx, as(&pb.RemoveRequest{Path: filepath.Join(f.dir, "mine")}, "nobody")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.client.Remove(ctx, as(&pb.RemoveRequest{Path: filepath.Join(closed, "inside")}, "root")); err != nil {
		t.Fatal(err)
	}
}
