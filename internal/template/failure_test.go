package template

import "testing"

// The engine's messages (Docker 20.10's classic builder) and E2B's words
// for them, which the SDK shows and its tests match.
func TestFailureTexts(t *testing.T) {
	for _, tc := range []struct {
		in        instr
		msg, want string
	}{
		{runInstr("whoami", "root123"), "unable to find user root123: no matching entries in passwd file",
			"failed to run command 'whoami': command failed: unauthenticated: invalid username: 'root123'"},
		{runInstr("echo x && exit 7", "user"), "The command '/bin/sh -c echo x && exit 7' returned a non-zero code: 7",
			"failed to run command 'echo x && exit 7': exit status 7"},
		{copyInstr("nobody9:nobody9"), "unable to convert uid/gid chown string to host mapping: can't find uid for user nobody9: no such user: nobody9",
			"failed to move files in sandbox: chown: invalid user: 'nobody9:nobody9'"},
		{copyInstr("user:nogroup9"), "unable to convert uid/gid chown string to host mapping: can't find gid for group nogroup9: no such group: nogroup9",
			"failed to move files in sandbox: chown: invalid group: 'user:nogroup9'"},
		{workdirInstr(), "mkdir /var/lib/docker/overlay2/x/merged/etc/passwd: not a directory",
			"failed to create workdir: mkdir /var/lib/docker/overlay2/x/merged/etc/passwd: not a directory"},
		{fromInstr("e2b.dev/nope"), "manifest for e2b.dev/nope:latest not found: manifest unknown: manifest unknown",
			"image 'e2b.dev/nope' not found: the image or tag does not exist in the registry"},
		{fromInstr("nope/nope"), "pull access denied for nope/nope, repository does not exist or may require 'docker login': denied: requested access to the resource is denied",
			"repository 'nope/nope' not found: verify the image name is correct"},
		{userInstr(), "The command '/bin/sh -c id -u 'bad' || useradd' returned a non-zero code: 1",
			"failed to create user: exit status 1"},
		{instr{}, "something else", "something else"},
	} {
		if got := tc.in.failure(tc.msg); got != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.msg, got, tc.want)
		}
	}
}
