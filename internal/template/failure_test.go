package template

import "testing"

// The engine's messages (Docker 20.10's classic builder) and E2B's words
// for them, which the SDK shows and its tests match.
func TestFailureTexts(t *testing.T) {
	for _, tc := range []struct {
		in        instr
		msg, want string
	}{
		{instr{kind: "RUN", arg: "whoami", user: "root123"}, "unable to find user root123: no matching entries in passwd file",
			"failed to run command 'whoami': command failed: unauthenticated: invalid username: 'root123'"},
		{instr{kind: "RUN", arg: "echo x && exit 7", user: "user"}, "The command '/bin/sh -c echo x && exit 7' returned a non-zero code: 7",
			"failed to run command 'echo x && exit 7': exit status 7"},
		{instr{kind: "COPY", arg: "nobody9:nobody9"}, "unable to convert uid/gid chown string to host mapping: can't find uid for user nobody9: no such user: nobody9",
			"failed to move files in sandbox: chown: invalid user: 'nobody9:nobody9'"},
		{instr{kind: "COPY", arg: "user:nogroup9"}, "unable to convert uid/gid chown string to host mapping: can't find gid for group nogroup9: no such group: nogroup9",
			"failed to move files in sandbox: chown: invalid group: 'user:nogroup9'"},
		{instr{kind: "WORKDIR", arg: "/etc/passwd"}, "mkdir /var/lib/docker/overlay2/x/merged/etc/passwd: not a directory",
			"failed to create workdir: mkdir /var/lib/docker/overlay2/x/merged/etc/passwd: not a directory"},
		{instr{kind: "FROM", arg: "e2b.dev/nope"}, "manifest for e2b.dev/nope:latest not found: manifest unknown: manifest unknown",
			"image 'e2b.dev/nope' not found: the image or tag does not exist in the registry"},
		{instr{kind: "FROM", arg: "nope/nope"}, "pull access denied for nope/nope, repository does not exist or may require 'docker login': denied: requested access to the resource is denied",
			"repository 'nope/nope' not found: verify the image name is correct"},
		{instr{kind: "USER", arg: "bad"}, "The command '/bin/sh -c id -u 'bad' || useradd' returned a non-zero code: 1",
			"failed to create user: exit status 1"},
		{instr{}, "something else", "something else"},
	} {
		if got := tc.in.failure(tc.msg); got != tc.want {
			t.Errorf("%s %q:\n got %q\nwant %q", tc.in.kind, tc.msg, got, tc.want)
		}
	}
}
