package e2b

import (
	"context"
	"errors"
	"net/url"
	"path"
	"strings"
	"time"
)

// Git runs git in a sandbox (the image must have it), as E2B's sandbox.git does: every call
// is a git command run with Commands, with prompts for credentials turned off. Failing git
// commands are *CommandExitError; refused credentials are *GitAuthError, a push or pull
// without an upstream *GitUpstreamError.
type Git struct{ c *Commands }

// GitOptions are the options of every git call.
type GitOptions struct {
	// User runs git as this user; default the sandbox's default user.
	User string
	// Envs are added to git's environment.
	Envs map[string]string
	// Timeout bounds the command as in CommandOptions.
	Timeout time.Duration
}

// GitAuthError reports credentials a git remote refused (or that were needed).
type GitAuthError struct{ AuthenticationError }

func (e *GitAuthError) Unwrap() error { return &e.AuthenticationError }

// GitUpstreamError reports a push or pull of a branch that has no upstream.
type GitUpstreamError struct{ SandboxError }

func (e *GitUpstreamError) Unwrap() error { return &e.SandboxError }

// run runs git args in repo ("" for none) and returns the result.
func (g *Git) run(ctx context.Context, repo string, opts GitOptions, args ...string) (*CommandResult, error) {
	return g.shell(ctx, gitCommand(repo, args...), opts)
}

func (g *Git) shell(ctx context.Context, cmd string, opts GitOptions) (*CommandResult, error) {
	envs := map[string]string{"GIT_TERMINAL_PROMPT": "0"}
	for k, v := range opts.Envs {
		envs[k] = v
	}
	return g.c.Run(ctx, cmd, CommandOptions{User: opts.User, Envs: envs, Timeout: opts.Timeout})
}

func gitCommand(repo string, args ...string) string {
	if repo != "" {
		args = append([]string{"-C", repo}, args...)
	}
	return "git " + quoteAll(args)
}

// GitCloneOptions configures Clone.
type GitCloneOptions struct {
	GitOptions
	// Path is where to clone; default git's (the repository's name).
	Path   string
	Branch string
	Depth  int
	// Username and Password (or token) authenticate to an http(s) remote. They are removed
	// from the clone's remote URL unless DangerouslyStoreCredentials.
	Username, Password          string
	DangerouslyStoreCredentials bool
}

// Clone clones a repository.
func (g *Git) Clone(ctx context.Context, repoURL string, opts GitCloneOptions) (*CommandResult, error) {
	if opts.Password != "" && opts.Username == "" {
		return nil, invalidArg("Username is required when using a password or token for git clone.")
	}
	withCreds, err := credentialURL(repoURL, opts.Username, opts.Password)
	if err != nil {
		return nil, err
	}
	strip := withCreds != repoURL && !opts.DangerouslyStoreCredentials
	dir := opts.Path
	if strip && dir == "" {
		if dir = repoDir(repoURL); dir == "" {
			return nil, invalidArg("A destination path is required when using credentials without storing them.")
		}
	}
	args := []string{"clone", withCreds}
	if opts.Branch != "" {
		args = append(args, "--branch", opts.Branch, "--single-branch")
	}
	if opts.Depth > 0 {
		args = append(args, "--depth", itoa(opts.Depth))
	}
	if dir != "" {
		args = append(args, dir)
	}
	res, err := g.run(ctx, "", opts.GitOptions, args...)
	if err != nil {
		return nil, gitError(err, "clone", opts.Username != "" && opts.Password == "")
	}
	if strip {
		if _, err := g.run(ctx, dir, opts.GitOptions, "remote", "set-url", "origin", repoURL); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// Init creates a repository at path.
func (g *Git) Init(ctx context.Context, dir string, bare bool, initialBranch string, opts GitOptions) (*CommandResult, error) {
	args := []string{"init"}
	if initialBranch != "" {
		args = append(args, "--initial-branch", initialBranch)
	}
	if bare {
		args = append(args, "--bare")
	}
	return g.run(ctx, "", opts, append(args, dir)...)
}

// RemoteAdd adds a remote; with overwrite an existing one gets the new URL, with fetch it is
// fetched.
func (g *Git) RemoteAdd(ctx context.Context, repo, name, remoteURL string, fetch, overwrite bool, opts GitOptions) (*CommandResult, error) {
	if name == "" || remoteURL == "" {
		return nil, invalidArg("Both remote name and URL are required to add a git remote.")
	}
	add := []string{"remote", "add"}
	if fetch {
		add = append(add, "-f")
	}
	add = append(add, name, remoteURL)
	if !overwrite {
		return g.run(ctx, repo, opts, add...)
	}
	cmd := gitCommand(repo, add...) + " || " + gitCommand(repo, "remote", "set-url", name, remoteURL)
	if fetch {
		cmd = "(" + cmd + ") && " + gitCommand(repo, "fetch", name)
	}
	return g.shell(ctx, cmd, opts)
}

// RemoteGet returns a remote's URL, "" when there is no such remote.
func (g *Git) RemoteGet(ctx context.Context, repo, name string, opts GitOptions) (string, error) {
	if name == "" {
		return "", invalidArg("Remote name is required.")
	}
	res, err := g.shell(ctx, gitCommand(repo, "remote", "get-url", name)+" || true", opts)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(res.Stdout), nil
}

// Status returns the repository's branch and the state of its files.
func (g *Git) Status(ctx context.Context, repo string, opts GitOptions) (*GitStatus, error) {
	res, err := g.run(ctx, repo, opts, "status", "--porcelain=1", "-b")
	if err != nil {
		return nil, err
	}
	return parseGitStatus(res.Stdout), nil
}

// GitBranches lists a repository's local branches.
type GitBranches struct {
	Branches      []string
	CurrentBranch string
}

// Branches lists the local branches.
func (g *Git) Branches(ctx context.Context, repo string, opts GitOptions) (*GitBranches, error) {
	res, err := g.run(ctx, repo, opts, "branch", "--format=%(refname:short)\t%(HEAD)")
	if err != nil {
		return nil, err
	}
	out := &GitBranches{}
	for _, line := range strings.Split(res.Stdout, "\n") {
		name, head, _ := strings.Cut(strings.TrimSpace(line), "\t")
		if name == "" {
			continue
		}
		out.Branches = append(out.Branches, name)
		if head == "*" {
			out.CurrentBranch = name
		}
	}
	return out, nil
}

// CreateBranch creates a branch and checks it out.
func (g *Git) CreateBranch(ctx context.Context, repo, branch string, opts GitOptions) (*CommandResult, error) {
	return g.run(ctx, repo, opts, "checkout", "-b", branch)
}

// CheckoutBranch checks a branch out.
func (g *Git) CheckoutBranch(ctx context.Context, repo, branch string, opts GitOptions) (*CommandResult, error) {
	return g.run(ctx, repo, opts, "checkout", branch)
}

// DeleteBranch deletes a branch (force: even unmerged).
func (g *Git) DeleteBranch(ctx context.Context, repo, branch string, force bool, opts GitOptions) (*CommandResult, error) {
	flag := "-d"
	if force {
		flag = "-D"
	}
	return g.run(ctx, repo, opts, "branch", flag, branch)
}

// Add stages files; none stages every change (git add -A).
func (g *Git) Add(ctx context.Context, repo string, files []string, opts GitOptions) (*CommandResult, error) {
	args := []string{"add", "-A"}
	if len(files) > 0 {
		args = append([]string{"add", "--"}, files...)
	}
	return g.run(ctx, repo, opts, args...)
}

// GitCommitOptions configures Commit.
type GitCommitOptions struct {
	GitOptions
	AuthorName, AuthorEmail string
	AllowEmpty              bool
}

// Commit commits what is staged.
func (g *Git) Commit(ctx context.Context, repo, message string, opts GitCommitOptions) (*CommandResult, error) {
	var args []string
	if opts.AuthorName != "" {
		args = append(args, "-c", "user.name="+opts.AuthorName)
	}
	if opts.AuthorEmail != "" {
		args = append(args, "-c", "user.email="+opts.AuthorEmail)
	}
	args = append(args, "commit", "-m", message)
	if opts.AllowEmpty {
		args = append(args, "--allow-empty")
	}
	return g.run(ctx, repo, opts.GitOptions, args...)
}

// Reset resets HEAD (mode soft, mixed, hard, merge or keep; "" for git's default) to target
// ("" for HEAD), or only paths.
func (g *Git) Reset(ctx context.Context, repo, mode, target string, paths []string, opts GitOptions) (*CommandResult, error) {
	args := []string{"reset"}
	switch mode {
	case "":
	case "soft", "mixed", "hard", "merge", "keep":
		args = append(args, "--"+mode)
	default:
		return nil, invalidArg("Reset mode must be one of soft, mixed, hard, merge, keep.")
	}
	if target != "" {
		args = append(args, target)
	}
	if len(paths) > 0 {
		args = append(append(args, "--"), paths...)
	}
	return g.run(ctx, repo, opts, args...)
}

// Restore restores paths in the working tree (worktree), the index (staged) or both, from
// source ("" for the default).
func (g *Git) Restore(ctx context.Context, repo string, paths []string, staged, worktree bool, source string, opts GitOptions) (*CommandResult, error) {
	if len(paths) == 0 {
		return nil, invalidArg("At least one path is required.")
	}
	if !staged && !worktree {
		return nil, invalidArg("At least one of staged or worktree must be true.")
	}
	args := []string{"restore"}
	if worktree {
		args = append(args, "--worktree")
	}
	if staged {
		args = append(args, "--staged")
	}
	if source != "" {
		args = append(args, "--source", source)
	}
	return g.run(ctx, repo, opts, append(append(args, "--"), paths...)...)
}

// GitRemoteOptions configures Push and Pull.
type GitRemoteOptions struct {
	GitOptions
	Remote, Branch string
	// NoSetUpstream pushes without --set-upstream (which Push otherwise adds with a remote).
	NoSetUpstream bool
	// Username and Password (or token) authenticate for this call only.
	Username, Password string
}

// Push pushes the current branch.
func (g *Git) Push(ctx context.Context, repo string, opts GitRemoteOptions) (*CommandResult, error) {
	return g.remoteOp(ctx, repo, "push", opts, func(remote string) []string {
		args := []string{"push"}
		if remote != "" && !opts.NoSetUpstream {
			args = append(args, "--set-upstream")
		}
		return appendNonEmpty(args, remote, opts.Branch)
	})
}

// Pull pulls into the current branch.
func (g *Git) Pull(ctx context.Context, repo string, opts GitRemoteOptions) (*CommandResult, error) {
	if opts.Remote == "" && opts.Branch == "" {
		if res, err := g.run(ctx, repo, opts.GitOptions, "rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{u}"); err != nil || strings.TrimSpace(res.Stdout) == "" {
			return nil, upstreamError("pull")
		}
	}
	return g.remoteOp(ctx, repo, "pull", opts, func(remote string) []string {
		return appendNonEmpty([]string{"pull"}, remote, opts.Branch)
	})
}

// remoteOp runs a push or pull, with the credentials put in the remote's URL for its
// duration when given.
func (g *Git) remoteOp(ctx context.Context, repo, action string, opts GitRemoteOptions, args func(remote string) []string) (*CommandResult, error) {
	if opts.Password != "" && opts.Username == "" {
		return nil, invalidArg("Username is required when using a password or token for git %s.", action)
	}
	if opts.Username == "" || opts.Password == "" {
		res, err := g.run(ctx, repo, opts.GitOptions, args(opts.Remote)...)
		return res, gitError(err, action, opts.Username != "")
	}
	remote := opts.Remote
	if remote == "" {
		res, err := g.run(ctx, repo, opts.GitOptions, "remote")
		if err != nil {
			return nil, err
		}
		remotes := strings.Fields(res.Stdout)
		if len(remotes) != 1 {
			return nil, invalidArg("Remote is required when using username/password and the repository has multiple remotes.")
		}
		remote = remotes[0]
	}
	orig, err := g.run(ctx, repo, opts.GitOptions, "remote", "get-url", remote)
	if err != nil {
		return nil, err
	}
	original := strings.TrimSpace(orig.Stdout)
	withCreds, err := credentialURL(original, opts.Username, opts.Password)
	if err != nil {
		return nil, err
	}
	if _, err := g.run(ctx, repo, opts.GitOptions, "remote", "set-url", remote, withCreds); err != nil {
		return nil, err
	}
	res, opErr := g.run(ctx, repo, opts.GitOptions, args(remote)...)
	_, restoreErr := g.run(context.WithoutCancel(ctx), repo, opts.GitOptions, "remote", "set-url", remote, original)
	if opErr != nil {
		return nil, gitError(opErr, action, false)
	}
	return res, restoreErr
}

// GitConfigOptions configures SetConfig, GetConfig and ConfigureUser.
type GitConfigOptions struct {
	GitOptions
	// Scope is global (default), local (of Repo) or system.
	Scope string
	Repo  string
}

func (o GitConfigOptions) scope() (flag, repo string, err error) {
	switch o.Scope {
	case "", "global":
		return "--global", "", nil
	case "system":
		return "--system", "", nil
	case "local":
		if o.Repo == "" {
			return "", "", invalidArg(`A repository path is required when using scope "local".`)
		}
		return "--local", o.Repo, nil
	}
	return "", "", invalidArg("Git config scope must be one of: global, local, system.")
}

// SetConfig sets a git configuration value.
func (g *Git) SetConfig(ctx context.Context, key, value string, opts GitConfigOptions) (*CommandResult, error) {
	flag, repo, err := opts.scope()
	if err != nil {
		return nil, err
	}
	if key == "" {
		return nil, invalidArg("Git config key is required.")
	}
	return g.run(ctx, repo, opts.GitOptions, "config", flag, key, value)
}

// GetConfig returns a git configuration value, "" when it is not set.
func (g *Git) GetConfig(ctx context.Context, key string, opts GitConfigOptions) (string, error) {
	flag, repo, err := opts.scope()
	if err != nil {
		return "", err
	}
	if key == "" {
		return "", invalidArg("Git config key is required.")
	}
	res, err := g.shell(ctx, gitCommand(repo, "config", flag, "--get", key)+" || true", opts.GitOptions)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(res.Stdout), nil
}

// ConfigureUser sets user.name and user.email.
func (g *Git) ConfigureUser(ctx context.Context, name, email string, opts GitConfigOptions) (*CommandResult, error) {
	if name == "" || email == "" {
		return nil, invalidArg("Both name and email are required.")
	}
	if _, err := g.SetConfig(ctx, "user.name", name, opts); err != nil {
		return nil, err
	}
	return g.SetConfig(ctx, "user.email", email, opts)
}

// DangerouslyAuthenticate stores credentials for host (default github.com, protocol https) in
// git's credential store in the sandbox, in plain text, for every later git call.
func (g *Git) DangerouslyAuthenticate(ctx context.Context, username, password, host, protocol string, opts GitOptions) (*CommandResult, error) {
	if username == "" || password == "" {
		return nil, invalidArg("Both username and password are required to authenticate git.")
	}
	input := "protocol=" + or(strings.TrimSpace(protocol), "https") + "\nhost=" + or(strings.TrimSpace(host), "github.com") +
		"\nusername=" + username + "\npassword=" + password + "\n\n"
	if _, err := g.run(ctx, "", opts, "config", "--global", "credential.helper", "store"); err != nil {
		return nil, err
	}
	return g.shell(ctx, "printf %s "+shellQuote(input)+" | "+gitCommand("", "credential", "approve"), opts)
}

func appendNonEmpty(args []string, more ...string) []string {
	for _, m := range more {
		if m != "" {
			args = append(args, m)
		}
	}
	return args
}

// credentialURL puts username and password in an http(s) URL.
func credentialURL(raw, username, password string) (string, error) {
	if username == "" && password == "" {
		return raw, nil
	}
	if username == "" || password == "" {
		return "", invalidArg("Both username and password are required when using Git credentials.")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", invalidArg("Invalid Git URL: %s", raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", invalidArg("Only http(s) Git URLs support username/password credentials.")
	}
	u.User = url.UserPassword(username, password)
	return u.String(), nil
}

// repoDir is the directory git clone makes for a URL.
func repoDir(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	base := path.Base(strings.TrimRight(u.Path, "/"))
	if base == "." || base == "/" {
		return ""
	}
	return strings.TrimSuffix(base, ".git")
}

var (
	authFailures     = []string{"authentication failed", "terminal prompts disabled", "could not read username", "invalid username or password", "access denied", "permission denied", "not authorized"}
	upstreamFailures = []string{"no upstream branch", "no upstream configured", "no tracking information", "set the remote as upstream", "set the upstream branch", "please specify which branch you want to merge with"}
)

// gitError turns a failed clone, push or pull into *GitAuthError or *GitUpstreamError when
// git's output says so; other errors are returned as they are.
func gitError(err error, action string, missingPassword bool) error {
	var exit *CommandExitError
	if !errors.As(err, &exit) {
		return err
	}
	out := strings.ToLower(exit.Result.Stderr + "\n" + exit.Result.Stdout)
	for _, s := range authFailures {
		if strings.Contains(out, s) {
			msg := "Git " + action + " requires credentials for private repositories."
			if missingPassword {
				msg = "Git " + action + " requires a password/token for private repositories."
			}
			return &GitAuthError{AuthenticationError{Message: msg, Err: err}}
		}
	}
	if action != "clone" {
		for _, s := range upstreamFailures {
			if strings.Contains(out, s) {
				return upstreamError(action)
			}
		}
	}
	return err
}

func upstreamError(action string) error {
	return &GitUpstreamError{SandboxError{Message: "Git " + action + " failed because no upstream branch is configured: pass the remote and the branch, or set the upstream once (Push sets it when given a remote)."}}
}
