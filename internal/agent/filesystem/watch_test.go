package filesystem

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"

	"github.com/warrenhq/warren/internal/warrentest"
	pb "github.com/warrenhq/warren/proto/filesystem"
)

// event is what a test compares: the entry's presence, not its content.
type event struct {
	Name     string
	Type     pb.EventType
	HasEntry bool
}

// watchStream opens WatchDir and checks the start message.
func watchStream(t *testing.T, f *fixture, req *pb.WatchDirRequest) (*connect.ServerStreamForClient[pb.WatchDirResponse], context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	stream, err := f.client.WatchDir(ctx, connect.NewRequest(req))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if !stream.Receive() || stream.Msg().GetStart() == nil {
		cancel()
		t.Fatalf("first message = %v (%v), want start", stream.Msg(), stream.Err())
	}
	return stream, cancel
}

// collect reads filesystem events until it has seen want (in order, other
// events in between allowed) or gives up.
func collect(t *testing.T, stream *connect.ServerStreamForClient[pb.WatchDirResponse], want []event) {
	t.Helper()
	var got []event
	i := 0
	for i < len(want) && stream.Receive() {
		fe := stream.Msg().GetFilesystem()
		if fe == nil {
			continue
		}
		ev := event{fe.GetName(), fe.GetType(), fe.GetEntry() != nil}
		got = append(got, ev)
		if ev == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Fatalf("stream ended (%v) before all events came\nwant (in order): %v\ngot: %v", stream.Err(), want, got)
	}
}

func TestWatchDir(t *testing.T) {
	forEachCodec(t, func(t *testing.T, f *fixture) {
		stream, cancel := watchStream(t, f, &pb.WatchDirRequest{Path: f.dir})
		defer cancel()
		file := filepath.Join(f.dir, "a.txt")
		warrentest.WriteFile(t, file, "hi")
		if err := os.Remove(file); err != nil {
			t.Fatal(err)
		}
		collect(t, stream, []event{
			{"a.txt", pb.EventType_EVENT_TYPE_CREATE, false},
			{"a.txt", pb.EventType_EVENT_TYPE_WRITE, false},
			{"a.txt", pb.EventType_EVENT_TYPE_CHMOD, false},
			{"a.txt", pb.EventType_EVENT_TYPE_REMOVE, false},
		})
	})
}

func TestWatchDirRecursiveWithEntries(t *testing.T) {
	forEachCodec(t, func(t *testing.T, f *fixture) {
		if err := os.Mkdir(filepath.Join(f.dir, "old"), 0o755); err != nil {
			t.Fatal(err)
		}
		stream, cancel := watchStream(t, f, &pb.WatchDirRequest{Path: f.dir, Recursive: true, IncludeEntry: true})
		defer cancel()
		warrentest.WriteFile(t, filepath.Join(f.dir, "old", "x.txt"), "x")
		// A directory made after the watch started, filled at once.
		warrentest.WriteFile(t, filepath.Join(f.dir, "new", "deeper", "y.txt"), "y")
		collect(t, stream, []event{
			{"old/x.txt", pb.EventType_EVENT_TYPE_CREATE, true},
			{"new", pb.EventType_EVENT_TYPE_CREATE, true},
			{"new/deeper/y.txt", pb.EventType_EVENT_TYPE_CREATE, true},
		})
		// Rename after the creates were seen: an entry is only attached
		// when the file still exists as the event is handled.
		if err := os.Rename(filepath.Join(f.dir, "old", "x.txt"), filepath.Join(f.dir, "old", "z.txt")); err != nil {
			t.Fatal(err)
		}
		collect(t, stream, []event{
			{"old/x.txt", pb.EventType_EVENT_TYPE_RENAME, false},
			{"old/z.txt", pb.EventType_EVENT_TYPE_CREATE, true},
		})
		// Events in the new directory keep coming once it is watched.
		warrentest.WriteFile(t, filepath.Join(f.dir, "new", "later.txt"), "z")
		collect(t, stream, []event{{"new/later.txt", pb.EventType_EVENT_TYPE_CREATE, true}})
	})
}

func TestWatchDirEntryDescribesFile(t *testing.T) {
	f := newFixture(t)
	stream, cancel := watchStream(t, f, &pb.WatchDirRequest{Path: f.dir, IncludeEntry: true})
	defer cancel()
	if err := os.Mkdir(filepath.Join(f.dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for stream.Receive() {
		fe := stream.Msg().GetFilesystem()
		if fe == nil {
			continue
		}
		e := fe.GetEntry()
		want := []any{"d", pb.FileType_FILE_TYPE_DIRECTORY, filepath.Join(f.dir, "d")}
		if diff := cmp.Diff(want, []any{e.GetName(), e.GetType(), e.GetPath()}); diff != "" {
			t.Errorf("entry (-want +got):\n%s", diff)
		}
		return
	}
	t.Fatalf("no event: %v", stream.Err())
}

func TestWatchDirNonRecursiveIgnoresNested(t *testing.T) {
	f := newFixture(t)
	if err := os.Mkdir(filepath.Join(f.dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	stream, cancel := watchStream(t, f, &pb.WatchDirRequest{Path: f.dir})
	defer cancel()
	warrentest.WriteFile(t, filepath.Join(f.dir, "sub", "hidden.txt"), "x")
	warrentest.WriteFile(t, filepath.Join(f.dir, "top.txt"), "x")
	for stream.Receive() {
		fe := stream.Msg().GetFilesystem()
		if fe == nil {
			continue
		}
		if fe.GetName() == "top.txt" {
			return
		}
		if fe.GetName() != "sub" {
			t.Errorf("event for %q from a non-recursive watch", fe.GetName())
		}
	}
	t.Fatalf("stream ended: %v", stream.Err())
}

func TestWatchDirErrors(t *testing.T) {
	forEachCodec(t, func(t *testing.T, f *fixture) {
		file := filepath.Join(f.dir, "file")
		warrentest.WriteFile(t, file, "x")
		for _, tc := range []struct {
			name string
			path string
			code connect.Code
		}{
			{"missing", filepath.Join(f.dir, "missing"), connect.CodeNotFound},
			{"file", file, connect.CodeInvalidArgument},
		} {
			t.Run(tc.name, func(t *testing.T) {
				stream, err := f.client.WatchDir(context.Background(), connect.NewRequest(&pb.WatchDirRequest{Path: tc.path}))
				if err == nil {
					for stream.Receive() {
						t.Errorf("got message %v", stream.Msg())
					}
					err = stream.Err()
				}
				wantCode(t, err, tc.code, "")
			})
		}
	})
}

func TestWatchDirKeepaliveAndDeadline(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	req := connect.NewRequest(&pb.WatchDirRequest{Path: f.dir})
	req.Header().Set("Keepalive-Ping-Interval", "1")
	stream, err := f.client.WatchDir(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for stream.Receive() {
		switch {
		case stream.Msg().GetStart() != nil:
			kinds = append(kinds, "start")
		case stream.Msg().GetKeepalive() != nil:
			kinds = append(kinds, "keepalive")
		}
	}
	if diff := cmp.Diff([]string{"start", "keepalive"}, kinds); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	wantCode(t, stream.Err(), connect.CodeDeadlineExceeded, "")
}

func TestNetworkFilesystemDetection(t *testing.T) {
	name, network, err := networkFilesystem(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if network {
		t.Errorf("temp dir reported as network filesystem %q", name)
	}
}

func TestPollingWatcher(t *testing.T) {
	forEachCodec(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		created, err := f.client.CreateWatcher(ctx, connect.NewRequest(&pb.CreateWatcherRequest{Path: f.dir, Recursive: true}))
		if err != nil {
			t.Fatal(err)
		}
		id := created.Msg.GetWatcherId()
		warrentest.WriteFile(t, filepath.Join(f.dir, "sub", "p.txt"), "x")
		var got []string
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			res, err := f.client.GetWatcherEvents(ctx, connect.NewRequest(&pb.GetWatcherEventsRequest{WatcherId: id}))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range res.Msg.GetEvents() {
				if e.GetType() == pb.EventType_EVENT_TYPE_CREATE {
					got = append(got, e.GetName())
				}
			}
			if len(got) >= 2 {
				break
			}
		}
		if diff := cmp.Diff([]string{"sub", "sub/p.txt"}, got); diff != "" {
			t.Errorf("created (-want +got):\n%s", diff)
		}
		if _, err := f.client.RemoveWatcher(ctx, connect.NewRequest(&pb.RemoveWatcherRequest{WatcherId: id})); err != nil {
			t.Fatal(err)
		}
		_, err = f.client.GetWatcherEvents(ctx, connect.NewRequest(&pb.GetWatcherEventsRequest{WatcherId: id}))
		wantCode(t, err, connect.CodeNotFound, "")
		_, err = f.client.RemoveWatcher(ctx, connect.NewRequest(&pb.RemoveWatcherRequest{WatcherId: id}))
		wantCode(t, err, connect.CodeNotFound, "")
		_, err = f.client.CreateWatcher(ctx, connect.NewRequest(&pb.CreateWatcherRequest{Path: filepath.Join(f.dir, "missing")}))
		wantCode(t, err, connect.CodeNotFound, "")
	})
}
