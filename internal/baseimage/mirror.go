package baseimage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"slices"
	"strings"
)

// Mirrors are the Debian archives the image is installed from and its apt sources point at.
type Mirrors struct {
	// Main serves the suite and its -updates, e.g. "http://<mirror>/debian". Required.
	Main string
	// Security serves the suite's -security updates; empty means the image has no security
	// source (apt configuration had none for the suite).
	Security string
}

// aptSource is one "deb" entry of apt's configuration, in either format.
type aptSource struct {
	URI    string
	Suites []string
}

// FindMirrors reads apt's configuration under root (a file system rooted at "/": etc/apt/sources.list,
// etc/apt/sources.list.d/*.list and *.sources) and returns the first archives that serve suite and
// suite-security. override, when set (from --mirror or WARREN_DEBIAN_MIRROR), replaces the main one.
func FindMirrors(root fs.FS, suite, override string) (Mirrors, error) {
	sources, err := readAptSources(root)
	if err != nil {
		return Mirrors{}, err
	}
	var m Mirrors
	for _, s := range sources {
		if m.Main == "" && slices.Contains(s.Suites, suite) {
			m.Main = s.URI
		}
		if m.Security == "" && slices.Contains(s.Suites, suite+"-security") {
			m.Security = s.URI
		}
	}
	if override != "" {
		if err := ValidateMirror(override); err != nil {
			return Mirrors{}, err
		}
		m.Main = strings.TrimRight(override, "/")
	}
	if m.Main == "" {
		return Mirrors{}, fmt.Errorf("no Debian mirror serving %q found in /etc/apt/sources.list or /etc/apt/sources.list.d: "+
			"pass --mirror URL or set WARREN_DEBIAN_MIRROR=URL (a Debian archive with dists/%s, e.g. http://HOST/debian)", suite, suite)
	}
	return m, nil
}

// ValidateMirror checks that s is a URL debootstrap and apt (in the image) can fetch from.
func ValidateMirror(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("mirror %q is not a URL: %w", s, err)
	}
	if (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		return nil
	}
	return fmt.Errorf("mirror %q must be an http:// or https:// URL of a Debian archive", s)
}

func readAptSources(root fs.FS) ([]aptSource, error) {
	var sources []aptSource
	data, err := fs.ReadFile(root, "etc/apt/sources.list")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read apt configuration: %w", err)
	}
	sources = append(sources, parseSourcesList(data)...)

	entries, err := fs.ReadDir(root, "etc/apt/sources.list.d")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read apt configuration: %w", err)
	}
	for _, e := range entries { // ReadDir sorts by name, as apt reads them
		name := path.Join("etc/apt/sources.list.d", e.Name())
		ext := path.Ext(e.Name())
		if e.IsDir() || (ext != ".list" && ext != ".sources") {
			continue
		}
		data, err := fs.ReadFile(root, name)
		if err != nil {
			return nil, fmt.Errorf("read apt configuration: %w", err)
		}
		if ext == ".list" {
			sources = append(sources, parseSourcesList(data)...)
		} else {
			sources = append(sources, parseDeb822(data)...)
		}
	}
	return sources, nil
}

// parseSourcesList reads the one-line format: "deb [options] URI suite [component...]".
func parseSourcesList(data []byte) []aptSource {
	var out []aptSource
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) < 3 || fields[0] != "deb" {
			continue
		}
		fields = fields[1:]
		if strings.HasPrefix(fields[0], "[") {
			// Options may contain spaces: skip to the field that closes them.
			i := slices.IndexFunc(fields, func(f string) bool { return strings.HasSuffix(f, "]") })
			if i < 0 {
				continue
			}
			fields = fields[i+1:]
		}
		if len(fields) < 2 {
			continue
		}
		out = append(out, aptSource{URI: strings.TrimRight(fields[0], "/"), Suites: fields[1:2]})
	}
	return out
}

// parseDeb822 reads the deb822 format: stanzas of "Field: value" separated by blank lines.
func parseDeb822(data []byte) []aptSource {
	var out []aptSource
	for _, stanza := range deb822Stanzas(data) {
		if !slices.Contains(strings.Fields(stanza["types"]), "deb") || strings.EqualFold(stanza["enabled"], "no") {
			continue
		}
		uris := strings.Fields(stanza["uris"])
		if len(uris) == 0 {
			continue
		}
		out = append(out, aptSource{URI: strings.TrimRight(uris[0], "/"), Suites: strings.Fields(stanza["suites"])})
	}
	return out
}

// deb822Stanzas splits data into stanzas of lower-cased field names to values; continuation
// lines (starting with white space) are appended to the previous field.
func deb822Stanzas(data []byte) []map[string]string {
	var stanzas []map[string]string
	cur := map[string]string{}
	last := ""
	flush := func() {
		if len(cur) > 0 {
			stanzas = append(stanzas, cur)
		}
		cur, last = map[string]string{}, ""
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case strings.HasPrefix(line, "#"):
		case line[0] == ' ' || line[0] == '\t':
			if last != "" {
				cur[last] += " " + strings.TrimSpace(line)
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			last = strings.ToLower(strings.TrimSpace(k))
			cur[last] = strings.TrimSpace(v)
		}
	}
	flush()
	return stanzas
}

// aptSourcesFile is the deb822 file the image's apt reads: the same archives it was built from.
func aptSourcesFile(m Mirrors, suite string) string {
	const keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
	var b strings.Builder
	fmt.Fprintf(&b, "Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\nSigned-By: %s\n", m.Main, suite, suite, keyring)
	if m.Security != "" {
		fmt.Fprintf(&b, "\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\nSigned-By: %s\n", m.Security, suite, keyring)
	}
	return b.String()
}
