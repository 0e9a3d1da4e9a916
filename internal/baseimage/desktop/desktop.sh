# Sourced by the desktop image's Xvfb, startxfce4 and xdpyinfo (/usr/local/bin) with the display
# in $display. The X server and XFCE session of a display are started once, by whoever asks
# first (desktop-up at boot, or @e2b/desktop's Sandbox.create), and replaced only when asked
# for with other arguments (another resolution or DPI). The Xvfb and startxfce4 wrappers decide
# under one lock per display; a replacement holds it until the new server answers.
lock=/tmp/.warren-desktop$display.lock
# $server: "PID ARGS" of the X server started for the display.
server=/tmp/.warren-xvfb$display
# $session: the process session (sid) of the XFCE session started on it.
session=/tmp/.warren-xfce$display

# serving PID: PID is an X server (Debian's Xvfb) that has not ended.
serving() { [ -n "$1" ] && [ "$(readlink "/proc/$1/exe" 2>/dev/null)" = /usr/bin/Xvfb ] && live "$1"; }

# live PID: PID is a process that has not ended (not a zombie).
live() { [ -n "$1" ] && ps -o stat= -p "$1" 2>/dev/null | grep -qv '^Z'; }

# session_pids SID: the processes of session SID that have not ended, but for its dbus-launch,
# which outlives a SIGTERM by seconds, then ends the session's bus with it (killed, it would
# leave the bus running).
session_pids() { [ -n "$1" ] && ps -o pid=,stat=,comm= -s "$1" 2>/dev/null | awk '$2 !~ /^Z/ && $3 != "dbus-launch" { print $1 }'; }

# session_live SID: a process of session SID, its dbus-launch aside, has not ended.
session_live() { [ -n "$(session_pids "$1")" ]; }

# starting: a command for this display's X server runs that is not the X server itself: a shell
# about to run the Xvfb wrapper (the SDK's `bash -l -c "Xvfb :0 ..."`), the wrapper waiting for
# the lock, or a replacement's helper waiting for its new server to answer.
starting() {
	for p in $(pgrep -f "(^|[ /])Xvfb $display( |\$)"); do
		[ "$(readlink "/proc/$p/exe" 2>/dev/null)" = /usr/bin/Xvfb ] || return 0
	done
	return 1
}

# settle: waits (30 s at most) while the display's X server is starting or being replaced, so
# that what runs next talks to the server last asked for, not to the one it replaces.
settle() {
	i=0
	while starting && [ "$i" -lt 600 ]; do
		i=$((i + 1))
		sleep 0.05
	done
}
