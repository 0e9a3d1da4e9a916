package e2b

import (
	"fmt"
	"io/fs"
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
	// COPY: upload even when the server has the files; follow links when packing them.
	ForceUpload     bool `json:"forceUpload,omitempty"`
	ResolveSymlinks bool `json:"resolveSymlinks,omitempty"`
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
	return t.AptInstallWith(AptOptions{}, packages...)
}

// AptOptions are the options of AptInstallWith.
type AptOptions struct {
	NoInstallRecommends bool // apt-get install --no-install-recommends
	FixMissing          bool // apt-get install --fix-missing
}

// AptInstallWith installs Debian packages, as root, with apt-get's options.
func (t *Template) AptInstallWith(opts AptOptions, packages ...string) *Template {
	flags := ""
	if opts.NoInstallRecommends {
		flags += "--no-install-recommends "
	}
	if opts.FixMissing {
		flags += "--fix-missing "
	}
	return t.RunCmdAs("root", "apt-get update",
		"DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get install -y "+flags+strings.Join(packages, " "))
}

// PipInstall installs Python packages for every user (as root); none installs the current
// directory.
func (t *Template) PipInstall(packages ...string) *Template {
	return t.PipInstallWith(PipOptions{}, packages...)
}

// PipOptions are the options of PipInstallWith.
type PipOptions struct {
	// User installs for the current user only (pip install --user, as that user) instead of
	// for every user (as root).
	User bool
}

// PipInstallWith installs Python packages (none: the current directory) with pip's options.
func (t *Template) PipInstallWith(opts PipOptions, packages ...string) *Template {
	if len(packages) == 0 {
		packages = []string{"."}
	}
	if opts.User {
		return t.RunCmd("pip install --user " + strings.Join(packages, " "))
	}
	return t.RunCmdAs("root", "pip install "+strings.Join(packages, " "))
}

// NpmInstall installs npm packages into the working directory as the current user; none
// installs those of its package.json.
func (t *Template) NpmInstall(packages ...string) *Template {
	return t.NpmInstallWith(InstallOptions{}, packages...)
}

// InstallOptions are the options of NpmInstallWith and BunInstallWith.
type InstallOptions struct {
	Global bool // install globally (-g), as root
	Dev    bool // save as development dependencies
}

// NpmInstallWith installs npm packages with npm's options.
func (t *Template) NpmInstallWith(opts InstallOptions, packages ...string) *Template {
	return t.packageInstall("npm install", "--save-dev", opts, packages)
}

// BunInstall installs bun packages into the working directory as the current user; none
// installs those of its package.json.
func (t *Template) BunInstall(packages ...string) *Template {
	return t.BunInstallWith(InstallOptions{}, packages...)
}

// BunInstallWith installs bun packages with bun's options.
func (t *Template) BunInstallWith(opts InstallOptions, packages ...string) *Template {
	return t.packageInstall("bun install", "--dev", opts, packages)
}

func (t *Template) packageInstall(cmd, devFlag string, opts InstallOptions, packages []string) *Template {
	args := []string{cmd}
	if opts.Global {
		args = append(args, "-g")
	}
	if opts.Dev {
		args = append(args, devFlag)
	}
	args = append(args, packages...)
	if opts.Global {
		return t.RunCmdAs("root", strings.Join(args, " "))
	}
	return t.RunCmd(strings.Join(args, " "))
}

// TemplateGitOptions are the options of Template.GitClone.
type TemplateGitOptions struct {
	Branch string // clone only this branch
	Depth  int    // a shallow clone of this many commits; 0: all of them
	User   string // clone as this user; "": the current one
}

// GitClone clones a repository into path ("" for the repository's name in the working
// directory).
func (t *Template) GitClone(repoURL, path string, opts TemplateGitOptions) *Template {
	cmd := "git clone " + shellQuote(repoURL)
	if opts.Branch != "" {
		cmd += " --branch " + shellQuote(opts.Branch) + " --single-branch"
	}
	if opts.Depth > 0 {
		cmd += " --depth " + strconv.Itoa(opts.Depth)
	}
	if path != "" {
		cmd += " " + shellQuote(path)
	}
	return t.runAs(opts.User, cmd)
}

// runAs runs cmd as user, or as the current user when user is "".
func (t *Template) runAs(user, cmd string) *Template {
	if user == "" {
		return t.RunCmd(cmd)
	}
	return t.RunCmdAs(user, cmd)
}

// AddMCPServer pulls MCP servers into a template based on the mcp-gateway template (the
// build fails with a *BuildError on any other base).
func (t *Template) AddMCPServer(servers ...string) *Template {
	if t.fromTemplate != MCPTemplate {
		t.err = &BuildError{Message: "MCP servers can only be added to mcp-gateway template"}
	}
	return t.RunCmdAs("root", "mcp-gateway pull "+strings.Join(servers, " "))
}

// DevContainerTemplate is the template whose images hold the devcontainer CLI, which
// BetaDevContainerPrebuild and BetaSetDevContainerStart need.
const DevContainerTemplate = "devcontainer"

// BetaDevContainerPrebuild builds the dev container described in dir (a directory holding
// .devcontainer/) while the template is built, so that its sandboxes start it at once. The
// template must be based on DevContainerTemplate (the build fails with a *BuildError on any
// other base).
func (t *Template) BetaDevContainerPrebuild(dir string) *Template {
	t.needDevContainer()
	return t.RunCmdAs("root", "devcontainer build --workspace-folder "+shellQuote(dir))
}

// BetaSetDevContainerStart starts the dev container described in dir with every sandbox,
// ready once it is up; commands then run in it through /devcontainer.sh. The template must be
// based on DevContainerTemplate.
func (t *Template) BetaSetDevContainerStart(dir string) *Template {
	t.needDevContainer()
	q := shellQuote(dir)
	return t.SetStartCmd("sudo devcontainer up --workspace-folder "+q+
		" && sudo /prepare-exec.sh "+q+" | sudo tee /devcontainer.sh > /dev/null"+
		" && sudo chmod +x /devcontainer.sh && sudo touch /devcontainer.up", WaitForFile("/devcontainer.up"))
}

func (t *Template) needDevContainer() {
	if t.fromTemplate != DevContainerTemplate {
		t.err = &BuildError{Message: "Devcontainers can only used in the devcontainer template"}
	}
}

// StepOptions are the options of the steps that change files: MakeDirWith, RemoveWith,
// RenameWith and MakeSymlinkWith.
type StepOptions struct {
	User      string      // run the step as this user; "": the current one
	Mode      fs.FileMode // MakeDirWith: the directories' mode; 0: the umask's
	Force     bool        // RemoveWith: ignore missing paths; RenameWith, MakeSymlinkWith: replace dest
	Recursive bool        // RemoveWith: directories with their content
}

// MakeDir creates directories with their parents.
func (t *Template) MakeDir(paths ...string) *Template {
	return t.MakeDirWith(StepOptions{}, paths...)
}

// MakeDirWith creates directories with their parents, with opts.Mode and as opts.User.
func (t *Template) MakeDirWith(opts StepOptions, paths ...string) *Template {
	cmd := "mkdir -p "
	if opts.Mode != 0 {
		cmd += fmt.Sprintf("-m %04o ", uint32(opts.Mode.Perm()))
	}
	return t.runAs(opts.User, cmd+quoteAll(paths))
}

// Remove removes files (rm: directories need RemoveWith and Recursive).
func (t *Template) Remove(paths ...string) *Template {
	return t.RemoveWith(StepOptions{}, paths...)
}

// RemoveWith removes paths, with opts.Recursive (-r), opts.Force (-f) and as opts.User.
func (t *Template) RemoveWith(opts StepOptions, paths ...string) *Template {
	cmd := "rm "
	if opts.Recursive {
		cmd += "-r "
	}
	if opts.Force {
		cmd += "-f "
	}
	return t.runAs(opts.User, cmd+quoteAll(paths))
}

// Rename moves src to dest.
func (t *Template) Rename(src, dest string) *Template {
	return t.RenameWith(src, dest, StepOptions{})
}

// RenameWith moves src to dest, with opts.Force (-f) and as opts.User.
func (t *Template) RenameWith(src, dest string, opts StepOptions) *Template {
	cmd := "mv " + quoteAll([]string{src, dest})
	if opts.Force {
		cmd += " -f"
	}
	return t.runAs(opts.User, cmd)
}

// MakeSymlink makes dest a symbolic link to src.
func (t *Template) MakeSymlink(src, dest string) *Template {
	return t.MakeSymlinkWith(src, dest, StepOptions{})
}

// MakeSymlinkWith makes dest a symbolic link to src, with opts.Force (-f: replace dest) and
// as opts.User.
func (t *Template) MakeSymlinkWith(src, dest string, opts StepOptions) *Template {
	cmd := "ln -s "
	if opts.Force {
		cmd += "-f "
	}
	return t.runAs(opts.User, cmd+quoteAll([]string{src, dest}))
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
