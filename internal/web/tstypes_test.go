package web

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/api"
)

// The front end's TypeScript types of the answers are checked against the
// Go types that make them, rather than generated from them: the
// TypeScript stays readable and narrower where it helps (a state's known
// values), needs no generator in the build, and this test names the field
// that drifted. Every interface declared in web/src must be in tsTypes.
var tsTypes = []tsType{
	{"api.ts", "Session", []any{sessionInfo{}}},
	{"api.ts", "Sandbox", []any{sandboxJSON{}}},
	{"api.ts", "Metric", []any{metricJSON{}}},
	{"api.ts", "LogLine", []any{logJSON{}, buildLogJSON{}}},
	{"api.ts", "LifecycleEvent", []any{eventJSON{}}},
	{"api.ts", "Build", []any{buildJSON{}}},
	{"api.ts", "Template", []any{templateJSON{}}},
	{"api.ts", "Snapshot", []any{snapshotJSON{}}},
	{"api.ts", "Volume", []any{volumeJSON{}}},
	{"api.ts", "Key", []any{keyJSON{}}},
	{"api.ts", "Check", []any{Check{}}},
	{"api.ts", "ServerView", []any{serverJSON{}}},
	{"api.ts", "TeamQuota", []any{teamQuotaJSON{}}},
	{"views/files.tsx", "Entry", []any{fileJSON{}}},
	{"views/webhooks.tsx", "Webhook", []any{webhookJSON{}}},
	{"views/webhooks.tsx", "Delivery", []any{api.Delivery{}}},
}

// tsType is an interface of web/src and the Go types it stands for.
type tsType struct {
	file, name string // file relative to web/src
	goTypes    []any  // more than one: the interface is any of them
}

const webSrc = "../../web/src"

// TestTypeScriptTypes: each interface has the fields of its Go types,
// each optional (?) exactly when Go may leave it out, each of the type
// Go's encoding gives it.
func TestTypeScriptTypes(t *testing.T) {
	for _, tc := range tsTypes {
		t.Run(tc.name, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(webSrc, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			body, ok := tsInterface(string(src), tc.name)
			if !ok {
				t.Fatalf("%s declares no interface %s", tc.file, tc.name)
			}
			var goFields []map[string]jsonField
			for _, v := range tc.goTypes {
				goFields = append(goFields, jsonFields(reflect.TypeOf(v)))
			}
			for _, msg := range compareFields(tsFields(body), goFields) {
				t.Errorf("%s %s: %s", tc.file, tc.name, msg)
			}
		})
	}
}

// TestEveryTypeScriptTypeChecked: a new interface in web/src needs a row
// in tsTypes, or it would drift unseen.
func TestEveryTypeScriptTypeChecked(t *testing.T) {
	err := filepath.WalkDir(webSrc, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".ts") || strings.HasSuffix(path, ".tsx")) {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(webSrc, path)
		for _, m := range tsInterfaceRE.FindAllStringSubmatch(string(src), -1) {
			if !slices.ContainsFunc(tsTypes, func(tt tsType) bool { return tt.file == filepath.ToSlash(rel) && tt.name == m[1] }) {
				t.Errorf("%s: interface %s is not checked against a Go type (add it to tsTypes)", rel, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

var (
	tsInterfaceRE = regexp.MustCompile(`(?m)^(?:export )?interface (\w+) \{`)
	tsFieldRE     = regexp.MustCompile(`^\s*(\w+)(\??):\s*(.+?);?\s*$`)
)

// tsInterface returns the body of interface name in src: the lines up to
// its closing brace at the start of a line.
func tsInterface(src, name string) (string, bool) {
	for _, m := range tsInterfaceRE.FindAllStringSubmatchIndex(src, -1) {
		if src[m[2]:m[3]] != name {
			continue
		}
		rest := src[m[1]:]
		end := strings.Index(rest, "\n}")
		if end < 0 {
			return "", false
		}
		return rest[:end], true
	}
	return "", false
}

// tsField is a member of a TypeScript object type.
type tsField struct {
	optional bool
	typ      string
}

// tsFields parses an object type's members, one a line or separated by
// semicolons on one line (an inline object).
func tsFields(body string) map[string]tsField {
	out := map[string]tsField{}
	for _, line := range splitMembers(body) {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		if m := tsFieldRE.FindStringSubmatch(line); m != nil {
			out[m[1]] = tsField{optional: m[2] == "?", typ: strings.TrimSpace(m[3])}
		}
	}
	return out
}

// splitMembers splits at newlines and at semicolons outside braces.
func splitMembers(body string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range body {
		switch {
		case c == '{':
			depth++
		case c == '}':
			depth--
		case (c == ';' || c == '\n') && depth == 0:
			out = append(out, body[start:i])
			start = i + 1
		}
	}
	return append(out, body[start:])
}

// jsonField is a member of a Go type's JSON encoding.
type jsonField struct {
	omitempty bool
	typ       reflect.Type
}

// jsonFields is what encoding/json makes of t's exported fields,
// embedded structs' fields included.
func jsonFields(t reflect.Type) map[string]jsonField {
	out := map[string]jsonField{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = jsonField{omitempty: strings.Contains(opts, "omitempty"), typ: f.Type}
	}
	return out
}

// compareFields says how ts differs from the union of goTypes: a field is
// optional when a Go type may leave it out or does not have it.
func compareFields(ts map[string]tsField, goTypes []map[string]jsonField) []string {
	var diffs []string
	names := map[string]bool{}
	for _, g := range goTypes {
		for n := range g {
			names[n] = true
		}
	}
	for n := range ts {
		if !names[n] {
			diffs = append(diffs, fmt.Sprintf("%q is in the TypeScript, not in Go", n))
		}
	}
	for n := range names {
		tf, ok := ts[n]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%q is in Go, not in the TypeScript", n))
			continue
		}
		optional := false
		for _, g := range goTypes {
			gf, ok := g[n]
			optional = optional || !ok || gf.omitempty
			if !ok {
				continue
			}
			if msg := compareType(tf.typ, gf.typ); msg != "" {
				diffs = append(diffs, fmt.Sprintf("%q: %s", n, msg))
			}
		}
		if optional != tf.optional {
			diffs = append(diffs, fmt.Sprintf("%q: optional in Go %v, in the TypeScript %v", n, optional, tf.optional))
		}
	}
	slices.Sort(diffs)
	return diffs
}

var timeType = reflect.TypeFor[time.Time]()

// compareType says how the TypeScript type ts differs from what
// encoding/json makes of g; "" when it does not. A union matches when
// one of its members does, and has null only where Go may encode null.
func compareType(ts string, g reflect.Type) string {
	for g.Kind() == reflect.Pointer {
		g = g.Elem()
	}
	members := strings.Split(ts, " | ")
	if len(members) > 1 && !strings.Contains(ts, "{") {
		if slices.Contains(members, "null") && !nullable(g) {
			return fmt.Sprintf("%s: Go's %s is never null", ts, g)
		}
		for _, m := range members {
			if m != "null" && !strings.HasPrefix(m, `"`) && compareType(m, g) == "" {
				return ""
			}
		}
		return fmt.Sprintf("no member of %s is Go's %s", ts, g)
	}
	want := func(s string) string {
		if ts == s {
			return ""
		}
		return fmt.Sprintf("TypeScript %s, Go %s (%s)", ts, g, s)
	}
	switch {
	case g == timeType:
		return want("string")
	case g.Kind() == reflect.String:
		return want("string")
	case g.Kind() == reflect.Bool:
		return want("boolean")
	case g.Kind() >= reflect.Int && g.Kind() <= reflect.Float64:
		return want("number")
	case g.Kind() == reflect.Slice:
		elem, ok := strings.CutSuffix(ts, "[]")
		if !ok {
			return fmt.Sprintf("TypeScript %s, Go %s (an array)", ts, g)
		}
		return compareType(elem, g.Elem())
	case g.Kind() == reflect.Map:
		inner, ok := strings.CutPrefix(ts, "Record<string, ")
		if !ok || !strings.HasSuffix(inner, ">") {
			return fmt.Sprintf("TypeScript %s, Go %s (a Record)", ts, g)
		}
		if g.Elem().Kind() == reflect.Interface {
			return want("Record<string, unknown>")
		}
		return compareType(strings.TrimSuffix(inner, ">"), g.Elem())
	case g.Kind() == reflect.Struct:
		return compareObject(ts, g)
	}
	return fmt.Sprintf("Go %s has no TypeScript counterpart here", g)
}

// compareObject compares an inline object type, or a named interface
// checked in its own row, with the struct g.
func compareObject(ts string, g reflect.Type) string {
	if inner, ok := strings.CutPrefix(ts, "{"); ok {
		diffs := compareFields(tsFields(strings.TrimSuffix(inner, "}")), []map[string]jsonField{jsonFields(g)})
		return strings.Join(diffs, "; ")
	}
	for _, tt := range tsTypes {
		if tt.name == ts && slices.ContainsFunc(tt.goTypes, func(v any) bool { return reflect.TypeOf(v) == g }) {
			return ""
		}
	}
	return fmt.Sprintf("TypeScript %s is not checked against Go %s in tsTypes", ts, g)
}

// nullable reports whether encoding/json may write null for a value of
// g: a nil map or slice. (A pointer is dereferenced before: the fields
// that have one here are omitempty.)
func nullable(g reflect.Type) bool {
	return g.Kind() == reflect.Map || g.Kind() == reflect.Slice
}
