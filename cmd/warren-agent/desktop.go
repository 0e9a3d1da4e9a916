package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/warrenhq/warren/internal/agent/oom"
	"github.com/warrenhq/warren/internal/agent/users"
)

// desktopScript is where the desktop image (internal/baseimage's
// DesktopRecipe) keeps the script that starts its X server and XFCE
// session with @e2b/desktop's default arguments.
const desktopScript = "/usr/local/lib/warren/desktop-up"

// startDesktop runs the image's desktopScript as the default user, in
// the background, as soon as the agent listens: a desktop sandbox the
// warm pool kept has its desktop up before @e2b/desktop's Sandbox.create
// starts one, and the image's Xvfb and startxfce4 take the running ones
// for theirs. The script's failure is only logged: the SDK then starts
// the desktop itself, as on E2B. The desktop lives in a session of its
// own, which outlives nothing: the container's stop ends it.
func (m *Main) startDesktop() {
	log := m.Log.With("service", "desktop")
	u, err := users.Lookup(defaultUserName)
	if err != nil {
		log.Warn("no desktop at boot: no default user", "err", err)
		return
	}
	cmd := exec.Command(filepath.Join(m.Root, desktopScript))
	cmd.Dir = u.Home
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + u.Home, "USER=" + u.Name, "LOGNAME=" + u.Name,
		"LANG=C.UTF-8", "DISPLAY=:0", "E2B_SANDBOX=true"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
	}
	if err := cmd.Start(); err != nil {
		log.Warn("no desktop at boot", "err", err)
		return
	}
	// The desktop is user code: the OOM killer takes it before the agent.
	_ = oom.MarkUserProcess(cmd.Process.Pid)
	go func() {
		// The script ends when the session does (it execs startxfce4).
		if err := cmd.Wait(); err != nil {
			log.Warn("the desktop started at boot ended", "err", err)
		}
	}()
	log.Info("desktop starting", "display", ":0", "user", u.Name)
}
