package template

import (
	"fmt"
	"regexp"
	"strings"
)

// A failed build's reason says why in the words of E2B's template
// builder, which the SDK shows as the BuildError's message (and its tests
// match): the step is the reason's Step, not part of the message.

// instr is what one Dockerfile instruction does for its template step:
// how its failure reads in E2B's words. The zero instr is one of Warren's
// own, whose failure is the engine's message.
type instr struct {
	explain func(msg string) string
}

// failure turns the engine's message for a failed instruction into E2B's.
func (in instr) failure(msg string) string {
	if in.explain == nil {
		return msg
	}
	return in.explain(msg)
}

var (
	exitCodeRE    = regexp.MustCompile(`returned a non-zero code: (\d+)`)
	unknownUserRE = regexp.MustCompile(`unable to find (user|group) `)
	chownRE       = regexp.MustCompile(`can't find (uid|gid) for (user|group)`)
)

// fromInstr is the FROM of image.
func fromInstr(image string) instr {
	return instr{func(msg string) string { return pullFailed(image, msg) }}
}

// runInstr is a RUN step's command, run as user.
func runInstr(cmd, user string) instr {
	return instr{func(msg string) string {
		if unknownUserRE.MatchString(msg) {
			return fmt.Sprintf("failed to run command '%s': command failed: unauthenticated: invalid username: '%s'", cmd, user)
		}
		if m := exitCodeRE.FindStringSubmatch(msg); m != nil {
			return fmt.Sprintf("failed to run command '%s': exit status %s", cmd, m[1])
		}
		return fmt.Sprintf("failed to run command '%s': %s", cmd, msg)
	}}
}

// copyInstr is a COPY step's copy, chowned to owner.
func copyInstr(owner string) instr {
	return instr{func(msg string) string {
		if m := chownRE.FindStringSubmatch(msg); m != nil {
			what := "user"
			if m[1] == "gid" {
				what = "group"
			}
			return copyFailed(fmt.Sprintf("chown: invalid %s: '%s'", what, owner))
		}
		return copyFailed(strings.TrimPrefix(msg, "COPY failed: "))
	}}
}

// workdirInstr is a WORKDIR step's WORKDIR.
func workdirInstr() instr {
	return instr{func(msg string) string { return "failed to create workdir: " + msg }}
}

// userInstr is a USER step's creation of its user.
func userInstr() instr {
	return instr{func(msg string) string {
		if m := exitCodeRE.FindStringSubmatch(msg); m != nil {
			return "failed to create user: exit status " + m[1]
		}
		return "failed to create user: " + msg
	}}
}

// copyFailed is E2B's message for a COPY step that failed because of why.
func copyFailed(why string) string {
	return "failed to move files in sandbox: " + why
}

// pullFailed is E2B's message for a base image the engine could not get.
func pullFailed(image, msg string) string {
	l := strings.ToLower(msg)
	switch {
	case strings.Contains(l, "manifest unknown") || strings.Contains(l, "not found: manifest"):
		return fmt.Sprintf("image '%s' not found: the image or tag does not exist in the registry", image)
	case strings.Contains(l, "repository does not exist"):
		return fmt.Sprintf("repository '%s' not found: verify the image name is correct", image)
	case strings.Contains(l, "unauthorized") || strings.Contains(l, "authentication required"):
		return fmt.Sprintf("access denied to '%s': authentication required or insufficient permissions", image)
	}
	return fmt.Sprintf("failed to pull image '%s': unable to retrieve image from registry: %s", image, msg)
}
