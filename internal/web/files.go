package web

import (
	"context"
	"io"
	"mime"
	"net/http"
	"path"
	"time"

	"github.com/warrenhq/warren/internal/agentclient"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Files reaches files in sandboxes through their agent;
// *agentclient.Client implements it.
type Files interface {
	ListDir(ctx context.Context, addr, accessToken, user, path string) ([]agentclient.FileEntry, error)
	ReadFile(ctx context.Context, addr, accessToken, user, path string) (io.ReadCloser, error)
	WriteFile(ctx context.Context, addr, accessToken, user, path string, body io.Reader) error
}

func (s *server) fileRoutes(mux *http.ServeMux) {
	mux.Handle("GET /dashboard/api/sandboxes/{id}/files", s.authed(s.listFiles))
	mux.Handle("GET /dashboard/api/sandboxes/{id}/files/download", s.authed(s.downloadFile))
	mux.Handle("POST /dashboard/api/sandboxes/{id}/files/upload", s.authed(s.uploadFile))
}

// fileRequest returns the team's sandbox of the request when it runs,
// and the request's path parameter.
func (s *server) fileRequest(r *http.Request, team string, required bool) (sandbox.Sandbox, string, error) {
	if s.cfg.Files == nil {
		return sandbox.Sandbox{}, "", sandbox.Errorf(sandbox.KindUnavailable, "this server has no file browser")
	}
	sb, err := s.teamSandbox(r, team)
	if err != nil {
		return sandbox.Sandbox{}, "", err
	}
	if sb.State != sandbox.StateRunning {
		return sandbox.Sandbox{}, "", sandbox.Errorf(sandbox.KindConflict, "sandbox %s is %s; resume it to reach its files", sb.ID, sb.State)
	}
	p := r.URL.Query().Get("path")
	if p == "" && required {
		return sandbox.Sandbox{}, "", sandbox.Errorf(sandbox.KindInvalid, "path is required")
	}
	return sb, p, nil
}

type fileJSON struct {
	Name     string    `json:"name"`
	Path     string    `json:"path"`
	Dir      bool      `json:"dir"`
	Symlink  bool      `json:"symlink,omitempty"`
	Size     int64     `json:"size"`
	Mode     string    `json:"mode"`
	Modified time.Time `json:"modified"`
}

// listFiles lists a directory, the user's home by default.
func (s *server) listFiles(w http.ResponseWriter, r *http.Request, team string) error {
	sb, p, err := s.fileRequest(r, team, false)
	if err != nil {
		return err
	}
	if p == "" {
		p = "/home/" + terminalUser
	}
	entries, err := s.cfg.Files.ListDir(r.Context(), sb.AgentAddr, sb.EnvdAccessToken, terminalUser, p)
	if err != nil {
		return err
	}
	out := make([]fileJSON, 0, len(entries))
	for _, e := range entries {
		out = append(out, fileJSON{Name: e.Name, Path: e.Path, Dir: e.Dir, Symlink: e.Symlink, Size: e.Size, Mode: e.Mode, Modified: e.Modified})
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": p, "entries": out})
	return nil
}

// downloadFile answers a file as an attachment: the browser saves it,
// never renders it in the dashboard's origin.
func (s *server) downloadFile(w http.ResponseWriter, r *http.Request, team string) error {
	sb, p, err := s.fileRequest(r, team, true)
	if err != nil {
		return err
	}
	body, err := s.cfg.Files.ReadFile(r.Context(), sb.AgentAddr, sb.EnvdAccessToken, terminalUser, p)
	if err != nil {
		return err
	}
	defer body.Close()
	name := path.Base(p)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name}))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	io.Copy(w, body)
	return nil
}

// uploadFile writes the request's body to path.
func (s *server) uploadFile(w http.ResponseWriter, r *http.Request, team string) error {
	sb, p, err := s.fileRequest(r, team, true)
	if err != nil {
		return err
	}
	if err := s.cfg.Files.WriteFile(r.Context(), sb.AgentAddr, sb.EnvdAccessToken, terminalUser, p, r.Body); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
