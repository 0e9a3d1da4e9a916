package e2b

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// DefaultBaseImage is the image of a template that names no base.
const DefaultBaseImage = "e2bdev/base"

// Template describes a sandbox template as build steps, the way E2B's template builder does:
// a base (an image or another template), then COPY, RUN, ENV, WORKDIR and USER steps, then
// the command that starts with every sandbox and the one that says it is ready. Build it with
// Client.BuildTemplate. Its methods return the template, so calls chain:
//
//	t := e2b.NewTemplate().FromTemplate("base").AptInstall("jq").Copy("app", "/app", e2b.CopyOptions{})
//
// A Template is not safe for concurrent use; build one template at a time.
type Template struct {
	contextDir   string // Copy sources are relative to it; "" is the working directory
	fromImage    string
	fromTemplate string
	registry     map[string]string
	steps        []templateStep
	startCmd     string
	readyCmd     string
	force        bool  // rebuild every layer
	forceNext    bool  // rebuild the layers from the next step on
	err          error // a step that cannot be built, reported by the build
}

// templateStep is one step as the build API takes it.
type templateStep struct {
	Type      string   `json:"type"`
	Args      []string `json:"args"`
	Force     bool     `json:"force"`
	FilesHash string   `json:"filesHash,omitempty"` // COPY: names the uploaded files
}

// NewTemplate starts a template on DefaultBaseImage.
func NewTemplate() *Template { return &Template{fromImage: DefaultBaseImage} }

// FromImage bases the template on a container image.
func (t *Template) FromImage(image string) *Template {
	t.fromImage, t.fromTemplate, t.registry = image, "", nil
	t.force = t.force || t.forceNext
	return t
}

// FromImageWithCredentials bases the template on an image of a private registry.
func (t *Template) FromImageWithCredentials(image, username, password string) *Template {
	t.FromImage(image)
	t.registry = map[string]string{"type": "registry", "username": username, "password": password}
	return t
}

// FromTemplate bases the template on another template (by name, name:tag or ID).
func (t *Template) FromTemplate(template string) *Template {
	t.fromTemplate, t.fromImage, t.registry = template, "", nil
	t.force = t.force || t.forceNext
	return t
}

// FromBaseImage bases the template on DefaultBaseImage.
func (t *Template) FromBaseImage() *Template { return t.FromImage(DefaultBaseImage) }

// FromDebianImage bases the template on debian:variant ("" means stable).
func (t *Template) FromDebianImage(variant string) *Template {
	return t.FromImage("debian:" + or(variant, "stable"))
}

// FromUbuntuImage bases the template on ubuntu:variant ("" means latest).
func (t *Template) FromUbuntuImage(variant string) *Template {
	return t.FromImage("ubuntu:" + or(variant, "latest"))
}

// FromPythonImage bases the template on python:version ("" means 3).
func (t *Template) FromPythonImage(version string) *Template {
	return t.FromImage("python:" + or(version, "3"))
}

// FromNodeImage bases the template on node:variant ("" means lts).
func (t *Template) FromNodeImage(variant string) *Template {
	return t.FromImage("node:" + or(variant, "lts"))
}

// FromFedoraImage bases the template on fedora:variant ("" means latest).
func (t *Template) FromFedoraImage(variant string) *Template {
	return t.FromImage("fedora:" + or(variant, "latest"))
}

// FromAlpineImage bases the template on alpine:variant ("" means latest).
func (t *Template) FromAlpineImage(variant string) *Template {
	return t.FromImage("alpine:" + or(variant, "latest"))
}

// FromArchImage bases the template on archlinux:variant ("" means latest).
func (t *Template) FromArchImage(variant string) *Template {
	return t.FromImage("archlinux:" + or(variant, "latest"))
}

// FromBunImage bases the template on oven/bun:variant ("" means latest).
func (t *Template) FromBunImage(variant string) *Template {
	return t.FromImage("oven/bun:" + or(variant, "latest"))
}

// FromAWSRegistry bases the template on an image of Amazon ECR.
func (t *Template) FromAWSRegistry(image, accessKeyID, secretAccessKey, region string) *Template {
	t.FromImage(image)
	t.registry = map[string]string{"type": "aws", "awsAccessKeyId": accessKeyID, "awsSecretAccessKey": secretAccessKey, "awsRegion": region}
	return t
}

// FromGCPRegistry bases the template on an image of Google's registries, with a service
// account's JSON key.
func (t *Template) FromGCPRegistry(image, serviceAccountJSON string) *Template {
	t.FromImage(image)
	t.registry = map[string]string{"type": "gcp", "serviceAccountJson": serviceAccountJSON}
	return t
}

func (t *Template) step(typ string, args ...string) *Template {
	t.steps = append(t.steps, templateStep{Type: typ, Args: args, Force: t.forceNext})
	return t
}

// RunCmd runs commands (joined with &&) in the image as the current user.
func (t *Template) RunCmd(cmds ...string) *Template { return t.step("RUN", strings.Join(cmds, " && ")) }

// RunCmdAs runs commands (joined with &&) in the image as user.
func (t *Template) RunCmdAs(user string, cmds ...string) *Template {
	return t.step("RUN", strings.Join(cmds, " && "), user)
}

// SetEnvs sets environment variables of the image (and of its sandboxes).
func (t *Template) SetEnvs(envs map[string]string) *Template {
	if len(envs) == 0 {
		return t
	}
	keys := make([]string, 0, len(envs))
	for k := range envs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		args = append(args, k, envs[k])
	}
	return t.step("ENV", args...)
}

// SetWorkdir sets the working directory of the next steps and of the sandboxes.
func (t *Template) SetWorkdir(dir string) *Template { return t.step("WORKDIR", dir) }

// SetUser sets the user of the next steps and the sandboxes' default user.
func (t *Template) SetUser(user string) *Template { return t.step("USER", user) }

// AptInstall installs Debian packages, as root.
func (t *Template) AptInstall(packages ...string) *Template {
	return t.RunCmdAs("root", "apt-get update",
		"DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get install -y "+strings.Join(packages, " "))
}

// PipInstall installs Python packages for every user (as root); none installs the current
// directory.
func (t *Template) PipInstall(packages ...string) *Template {
	if len(packages) == 0 {
		packages = []string{"."}
	}
	return t.RunCmdAs("root", "pip install "+strings.Join(packages, " "))
}

// NpmInstall installs npm packages globally (as root).
func (t *Template) NpmInstall(packages ...string) *Template {
	return t.RunCmdAs("root", "npm install -g "+strings.Join(packages, " "))
}

// BunInstall installs bun packages globally (as root).
func (t *Template) BunInstall(packages ...string) *Template {
	return t.RunCmdAs("root", "bun install -g "+strings.Join(packages, " "))
}

// GitClone clones a repository into path ("" for the repository's name in the working
// directory); branch and depth are left out when empty and 0.
func (t *Template) GitClone(repoURL, path, branch string, depth int) *Template {
	cmd := "git clone " + shellQuote(repoURL)
	if branch != "" {
		cmd += " --branch " + shellQuote(branch) + " --single-branch"
	}
	if depth > 0 {
		cmd += " --depth " + strconv.Itoa(depth)
	}
	if path != "" {
		cmd += " " + shellQuote(path)
	}
	return t.RunCmd(cmd)
}

// AddMCPServer pulls MCP servers into a template based on the mcp-gateway template (the
// build fails with a *BuildError on any other base).
func (t *Template) AddMCPServer(servers ...string) *Template {
	if t.fromTemplate != MCPTemplate {
		t.err = &BuildError{Message: "MCP servers can only be added to mcp-gateway template"}
	}
	return t.RunCmdAs("root", "mcp-gateway pull "+strings.Join(servers, " "))
}

// MakeDir creates directories with their parents.
func (t *Template) MakeDir(paths ...string) *Template {
	return t.RunCmd("mkdir -p " + quoteAll(paths))
}

// Remove removes paths, directories with their content.
func (t *Template) Remove(paths ...string) *Template {
	return t.RunCmd("rm -rf " + quoteAll(paths))
}

// Rename moves src to dest.
func (t *Template) Rename(src, dest string) *Template {
	return t.RunCmd("mv " + quoteAll([]string{src, dest}))
}

// MakeSymlink makes dest a symbolic link to src.
func (t *Template) MakeSymlink(src, dest string) *Template {
	return t.RunCmd("ln -s " + quoteAll([]string{src, dest}))
}

// SkipCache rebuilds the steps that follow instead of reusing cached layers (all of them when
// called before the base is set).
func (t *Template) SkipCache() *Template {
	t.forceNext = true
	return t
}

// SetStartCmd sets the command started with every sandbox and the command whose success
// says it is ready (see WaitForPort and the other Wait helpers).
func (t *Template) SetStartCmd(start, ready string) *Template {
	t.startCmd, t.readyCmd = start, ready
	return t
}

// SetReadyCmd sets the command whose success says a sandbox is ready.
func (t *Template) SetReadyCmd(ready string) *Template {
	t.readyCmd = ready
	return t
}

// WaitForPort is a ready command: something listens on port.
func WaitForPort(port int) string { return "ss -tuln | grep -q ':" + strconv.Itoa(port) + " '" }

// WaitForURL is a ready command: url answers with status.
func WaitForURL(url string, status int) string {
	return fmt.Sprintf("curl -s -o /dev/null -w '%%{http_code}' %s | grep -q '^%d$'", shellQuote(url), status)
}

// WaitForProcess is a ready command: a process of this name runs.
func WaitForProcess(name string) string { return "pgrep " + shellQuote(name) + " > /dev/null" }

// WaitForFile is a ready command: the file exists.
func WaitForFile(path string) string { return "[ -f " + shellQuote(path) + " ]" }

// WaitForTimeout is a ready command: the time has passed.
func WaitForTimeout(d time.Duration) string { return "sleep " + strconv.Itoa(max(seconds(d), 1)) }

// buildBody is the template as the build API's start call takes it.
func (t *Template) buildBody(force bool) map[string]any {
	steps := t.steps
	if steps == nil {
		steps = []templateStep{}
	}
	b := map[string]any{"steps": steps, "force": t.force || force}
	if t.fromTemplate != "" {
		b["fromTemplate"] = t.fromTemplate
	} else {
		b["fromImage"] = t.fromImage
	}
	if t.registry != nil {
		b["fromImageRegistry"] = t.registry
	}
	if t.startCmd != "" {
		b["startCmd"] = t.startCmd
	}
	if t.readyCmd != "" {
		b["readyCmd"] = t.readyCmd
	}
	return b
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = shellQuote(s)
	}
	return strings.Join(q, " ")
}
