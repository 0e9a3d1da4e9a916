package baseimage

import _ "embed"

// The desktop's start-up scripts (see DesktopRecipe).
var (
	//go:embed desktop/desktop-up
	desktopUp []byte
	//go:embed desktop/Xvfb
	desktopXvfb []byte
	//go:embed desktop/startxfce4
	desktopStartXfce4 []byte
	//go:embed desktop/xdpyinfo
	desktopXdpyinfo []byte
	//go:embed desktop/desktop.sh
	desktopLib []byte
	//go:embed desktop/x11vnc
	desktopX11vnc []byte
)

// DesktopRecipe is the recipe for warren/desktop, the "desktop" template
// of @e2b/desktop: the base image plus what that SDK runs in the sandbox.
// Its Sandbox.create starts `Xvfb :0` (1024x768x24 unless asked) and waits
// for xdpyinfo, then runs startxfce4 and waits for xfce4-session, xfwm4
// and xfdesktop; its methods call xdotool, scrot, xrandr, xdg-open and
// gtk-launch; its stream runs x11vnc on port 5900 and noVNC's
// /opt/noVNC/utils/novnc_proxy on 6080, and waits for the port with
// netstat. Everything comes from Debian's archive: noVNC and websockify
// are Debian's packages, linked where the SDK looks for them (E2B's own
// image clones both from GitHub).
//
// The XFCE session is its parts, not the xfce4 metapackage, which pulls
// in a PulseAudio plugin and Thunar's volume manager; with recommends off
// the image has no printing, sound or Xorg server. firefox-esr is the
// browser (x-www-browser, as in E2B's image), xfce4-terminal the
// terminal (x-terminal-emulator) and mousepad the text editor (text/plain,
// so the SDK's open(file) has an application). Documentation, manual
// pages and translations are not installed.
//
// The sandbox's agent, run with -desktop, starts the X server and the
// session at boot (desktop/desktop-up), so that a sandbox from the warm
// pool has them before the SDK asks; the Xvfb and startxfce4 in
// /usr/local/bin, first on PATH, take a running one started with the same
// arguments for the one asked for, and replace it otherwise. They decide
// under one lock per display, and xdpyinfo there waits while a server is
// being replaced, so the SDK goes on with the server it asked for
// (desktop/desktop.sh). The x11vnc there gives the stream's server a
// watcher that ends it when its own SIGTERM handler hangs (desktop/x11vnc).
func DesktopRecipe() LayerRecipe {
	return LayerRecipe{
		Packages: []string{
			"xvfb", "x11-utils", "x11-xserver-utils", "xdotool", "scrot", "xdg-utils", "libgtk-3-bin",
			"dbus-x11", "xfce4-session", "xfwm4", "xfdesktop4", "xfce4-panel", "xfce4-settings", "xfconf", "thunar",
			"xfce4-terminal", "mousepad", "firefox-esr", "fonts-dejavu-core", "desktop-file-utils", "file",
			"x11vnc", "novnc", "websockify", "net-tools",
		},
		Excludes: []string{"/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*", "/usr/share/help/*"},
		Files: []LayerFile{
			{Path: "/etc/xdg/autostart/warren-no-blanking.desktop", Mode: 0o644, Data: []byte(noBlanking)},
			{Path: "/usr/local/lib/warren/desktop-up", Mode: 0o755, Data: desktopUp},
			{Path: "/usr/local/bin/Xvfb", Mode: 0o755, Data: desktopXvfb},
			{Path: "/usr/local/bin/startxfce4", Mode: 0o755, Data: desktopStartXfce4},
			{Path: "/usr/local/bin/xdpyinfo", Mode: 0o755, Data: desktopXdpyinfo},
			{Path: "/usr/local/bin/x11vnc", Mode: 0o755, Data: desktopX11vnc},
			{Path: "/usr/local/lib/warren/desktop.sh", Mode: 0o644, Data: desktopLib},
		},
		Script: desktopScript,
	}
}

// noBlanking keeps the screen from blanking after ten idle minutes (the
// X server's default): an agent's screenshot must show the desktop.
const noBlanking = `[Desktop Entry]
Type=Application
Name=No screen blanking
Exec=sh -c "xset s off; xset s noblank; xset -dpms"
NoDisplay=true
`

// desktopScript links Debian's noVNC to /opt/noVNC, where the SDK runs it
// (its novnc_proxy finds Debian's websockify on PATH), with index.html
// opening the client as on E2B; links x11vnc as warren-screen, the
// dashboard's VNC server, which the SDK's `pgrep -x x11vnc` and `pkill
// x11vnc` do not take for its stream's; and gives XFCE's panel its default
// layout as the system's configuration, or its first start asks which one
// to use in a dialog over the desktop.
const desktopScript = `set -e
ln -s /usr/share/novnc /opt/noVNC
ln -s /usr/bin/x11vnc /usr/local/lib/warren/warren-screen
ln -s vnc.html /usr/share/novnc/index.html
test -x /opt/noVNC/utils/novnc_proxy
command -v websockify
mkdir -p /etc/xdg/xfce4/xfconf/xfce-perchannel-xml
cp /etc/xdg/xfce4/panel/default.xml /etc/xdg/xfce4/xfconf/xfce-perchannel-xml/xfce4-panel.xml
`
