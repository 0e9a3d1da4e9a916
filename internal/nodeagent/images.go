package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/warrenhq/warren/internal/sandbox"
)

// ImageStore keeps a node's images: the node's containerd (Containerd),
// or a test's fake. Every ref it is given is normalized (NormalizeRef);
// what the node lacks is KindNotFound.
type ImageStore interface {
	// Import loads the images of a tar (docker save's or Export's),
	// unpacked, and returns them; KindInvalid when it is no such tar.
	Import(ctx context.Context, tar io.Reader) ([]Image, error)
	List(ctx context.Context) ([]Image, error)
	Get(ctx context.Context, ref string) (Image, error)
	// Remove removes the image and, garbage-collected before it returns,
	// what no other image or container uses.
	Remove(ctx context.Context, ref string) error
	// Export writes the image as a tar that Import and `docker load`
	// take; it fails before writing anything when the image is missing.
	Export(ctx context.Context, ref string, w io.Writer) error
	// Commit writes the changes of a pod's container as one more layer on
	// its image, named ref, with labels added to its config's.
	Commit(ctx context.Context, uid, container, ref string, labels map[string]string) (Image, error)
}

// maxCommitBody bounds a commit request: a container name, a ref and
// labels.
const maxCommitBody = 1 << 20

// ServeImages serves the image API (what Client.ImportImage, Images,
// Image, RemoveImage, ExportImage and Commit call) on st.
func (s *Server) ServeImages(st ImageStore) {
	s.mux.HandleFunc("POST /v1/images", s.authed(func(w http.ResponseWriter, r *http.Request) (any, error) {
		// An image takes as long as its size to arrive: the server's read
		// timeout is for requests, not for this one.
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		imgs, err := st.Import(r.Context(), r.Body)
		if err != nil {
			return nil, err
		}
		return imageList{Images: imgs}, nil
	}))
	s.mux.HandleFunc("GET /v1/images", s.authed(func(_ http.ResponseWriter, r *http.Request) (any, error) {
		imgs, err := st.List(r.Context())
		if err != nil {
			return nil, err
		}
		return imageList{Images: imgs}, nil
	}))
	s.mux.HandleFunc("GET /v1/image", s.authed(func(_ http.ResponseWriter, r *http.Request) (any, error) {
		ref, err := queryRef(r)
		if err != nil {
			return nil, err
		}
		return st.Get(r.Context(), ref)
	}))
	s.mux.HandleFunc("DELETE /v1/image", s.authed(func(_ http.ResponseWriter, r *http.Request) (any, error) {
		ref, err := queryRef(r)
		if err != nil {
			return nil, err
		}
		return nil, st.Remove(r.Context(), ref)
	}))
	s.mux.HandleFunc("GET /v1/image/export", s.authed(func(w http.ResponseWriter, r *http.Request) (any, error) {
		ref, err := queryRef(r)
		if err != nil {
			return nil, err
		}
		out := &startedWriter{w: w}
		if err := st.Export(r.Context(), ref, out); err != nil {
			if !out.started {
				return nil, err
			}
			// Half a tar could pass for a whole one: cut the connection so
			// that the caller sees the export fail.
			s.log.WarnContext(r.Context(), "image export failed midway", "ref", ref, "err", err)
			panic(http.ErrAbortHandler)
		}
		if !out.started {
			out.start()
		}
		return answered{}, nil
	}))
	s.mux.HandleFunc("POST /v1/pods/{uid}/commit", s.pod(func(r *http.Request, uid string) (any, error) {
		var body struct {
			Container string            `json:"container"`
			Ref       string            `json:"ref"`
			Labels    map[string]string `json:"labels"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxCommitBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
				return nil, err
			}
			return nil, sandbox.Errorf(sandbox.KindInvalid, `want {"container": NAME, "ref": IMAGE, "labels": {...}}: %v`, err)
		}
		if msgs := validation.IsDNS1123Label(body.Container); len(msgs) > 0 {
			return nil, sandbox.Errorf(sandbox.KindInvalid, "%q is not a container name: %s", body.Container, msgs[0])
		}
		ref, err := NormalizeRef(body.Ref)
		if err != nil {
			return nil, err
		}
		for k := range body.Labels {
			if k == "" {
				return nil, sandbox.Errorf(sandbox.KindInvalid, "a label needs a name")
			}
		}
		return st.Commit(r.Context(), uid, body.Container, ref, body.Labels)
	}))
}

// imageList is the answer of an import and of a listing.
type imageList struct {
	Images []Image `json:"images"`
}

// queryRef is the request's one ref parameter, normalized.
func queryRef(r *http.Request) (string, error) {
	refs := r.URL.Query()["ref"]
	if len(refs) != 1 {
		return "", sandbox.Errorf(sandbox.KindInvalid, "name one image: ?ref=NAME[:TAG]")
	}
	return NormalizeRef(refs[0])
}

// startedWriter sends the export's headers with its first bytes, so that
// an export failing before it wrote anything still answers an error.
type startedWriter struct {
	w       http.ResponseWriter
	started bool
}

func (s *startedWriter) start() {
	s.started = true
	s.w.Header().Set("Content-Type", "application/x-tar")
	s.w.WriteHeader(http.StatusOK)
}

func (s *startedWriter) Write(p []byte) (int, error) {
	if !s.started {
		s.start()
	}
	return s.w.Write(p)
}
