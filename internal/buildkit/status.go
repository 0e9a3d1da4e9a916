package buildkit

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/distribution/reference"
	"github.com/moby/buildkit/client"
	"github.com/opencontainers/go-digest"
)

// instruction is one instruction of a Dockerfile: its keyword, upper
// case, and its text as written.
type instruction struct {
	keyword, text string
}

// instructions splits a Dockerfile into its instructions, in order
// (continuation lines joined, comments and blank lines left out), as the
// classic builder numbers them.
func instructions(dockerfile string) []instruction {
	var out []instruction
	var cur strings.Builder
	for line := range strings.Lines(dockerfile) {
		line = strings.TrimRight(line, "\r\n")
		t := strings.TrimSpace(line)
		if cur.Len() == 0 && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if rest, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(rest)
			continue
		}
		cur.WriteString(line)
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		kw, _, _ := strings.Cut(text, " ")
		out = append(out, instruction{keyword: strings.ToUpper(kw), text: text})
	}
	return out
}

// bases are the images the Dockerfile's FROMs name, as its frontend looks
// up named contexts: familiar, without ":latest".
func bases(instrs []instruction) []string {
	var out []string
	for _, in := range instrs {
		if in.keyword != "FROM" {
			continue
		}
		f := strings.Fields(in.text)
		if len(f) < 2 || strings.HasPrefix(f[1], "--") {
			continue
		}
		n, err := reference.ParseNormalizedNamed(f[1])
		if err != nil {
			continue
		}
		out = append(out, strings.TrimSuffix(reference.FamiliarString(n), ":latest"))
	}
	return out
}

// stepVertex is the frontend's name of an instruction's vertex:
// "[2/5] RUN ...", "[ 2/12] RUN ..." (numbers padded to one width).
var stepVertex = regexp.MustCompile(`^\[\s*(\d+)/\d+\] `)

// translator turns BuildKit's status stream into the classic builder's
// output lines: "Step N/M : INSTRUCTION" when an instruction's vertex
// starts, " ---> Using cache" when it came from the cache, then its
// output, line by line.
type translator struct {
	instrs []instruction
	// vertexed are the indexes of the instructions that get a vertex of
	// their own, which the frontend numbers from 1: a FROM of an image,
	// ADD, COPY, RUN and WORKDIR (ENV, USER, LABEL only change the
	// image's config).
	vertexed []int
	out      func(string)
	// names are the vertexes' names, as first sent (BuildKit names a
	// vertex before it starts, and may send its output before it says it
	// started).
	names map[digest.Digest]string
	// seen are the vertexes announced; running those started and not
	// completed.
	seen, running map[digest.Digest]bool
	// last is the instruction announced last; -1 none.
	last int
	// failed is the message of the first vertex that failed.
	failed string
	// partial holds each vertex's output after its last newline.
	partial map[digest.Digest]string
}

func newTranslator(instrs []instruction, out func(string)) *translator {
	t := &translator{instrs: instrs, out: out, names: map[digest.Digest]string{}, seen: map[digest.Digest]bool{},
		running: map[digest.Digest]bool{}, partial: map[digest.Digest]string{}, last: -1}
	for i, in := range instrs {
		switch in.keyword {
		case "FROM":
			if f := strings.Fields(in.text); len(f) > 1 && f[1] != "scratch" {
				t.vertexed = append(t.vertexed, i)
			}
		case "ADD", "COPY", "RUN", "WORKDIR":
			t.vertexed = append(t.vertexed, i)
		}
	}
	return t
}

// status takes one status update.
func (t *translator) status(s *client.SolveStatus) {
	for _, v := range s.Vertexes {
		if v.Name != "" {
			t.names[v.Digest] = v.Name
		}
		t.running[v.Digest] = v.Started != nil && v.Completed == nil
		if v.Started != nil || v.Cached {
			t.announce(v.Digest, v.Cached)
		}
		if v.Error != "" && t.failed == "" && !strings.Contains(v.Error, "context canceled") {
			t.failed = classicMessage(v.Error)
		}
	}
	for _, l := range s.Logs {
		t.announce(l.Vertex, false)
		data := t.partial[l.Vertex] + string(l.Data)
		i := strings.LastIndexByte(data, '\n')
		if i < 0 {
			t.partial[l.Vertex] = data
			continue
		}
		t.partial[l.Vertex] = data[i+1:]
		lines([]byte(data[:i]), t.out)
	}
}

// announce says, once, which instruction vertex d runs and whether it
// came from the cache; vertexes of no instruction (loading the context,
// exporting) go unsaid.
func (t *translator) announce(d digest.Digest, cached bool) {
	name, named := t.names[d]
	if t.seen[d] || !named {
		return
	}
	t.seen[d] = true
	m := stepVertex.FindStringSubmatch(name)
	if m == nil {
		return
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n < 1 || n > len(t.vertexed) {
		return
	}
	t.step(t.vertexed[n-1])
	if cached {
		t.out(" ---> Using cache")
	}
}

// step says instruction i runs.
func (t *translator) step(i int) {
	t.last = i
	t.out(fmt.Sprintf("Step %d/%d : %s", i+1, len(t.instrs), t.instrs[i].text))
}

// failedProcess is BuildKit's account of a RUN that failed, naming its
// command line.
var failedProcess = regexp.MustCompile(`process "(.*)" did not complete successfully`)

// stopped says, last, which instruction a failed build (err) stopped at:
// its status may end before the failing vertex said it started, or
// failed. The RUN whose command line err names, after the last one
// announced; else the instruction still running.
func (t *translator) stopped(err error) {
	if m := failedProcess.FindStringSubmatch(err.Error()); m != nil {
		for i := t.last + 1; i < len(t.instrs); i++ {
			if t.instrs[i].keyword == "RUN" && commandLine(t.instrs[i].text) == m[1] {
				t.step(i)
				return
			}
		}
	}
	for d, r := range t.running {
		if r {
			delete(t.seen, d)
			t.announce(d, false)
		}
	}
}

// commandLine is a RUN instruction's command as BuildKit names its
// process: the JSON form's arguments, or "/bin/sh -c" and the shell
// form's command, joined by spaces.
func commandLine(run string) string {
	rest := strings.TrimSpace(strings.TrimPrefix(run, run[:3]))
	var args []string
	if json.Unmarshal([]byte(rest), &args) == nil {
		return strings.Join(args, " ")
	}
	return "/bin/sh -c " + rest
}

// flush writes what output is left without a final newline.
func (t *translator) flush() {
	for d, p := range t.partial {
		if p != "" {
			t.out(p)
		}
		delete(t.partial, d)
	}
}

// failure is the message of the vertex that failed; "" when none did.
func (t *translator) failure() string { return t.failed }

// exitCode is BuildKit's account of a command that failed.
var exitCode = regexp.MustCompile(`did not complete successfully: exit code: (\d+)`)

// classicMessage words BuildKit's message as the classic builder would
// where the template registry reads it: a command's exit code.
func classicMessage(msg string) string {
	if m := exitCode.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("%s (returned a non-zero code: %s)", msg, m[1])
	}
	return msg
}
