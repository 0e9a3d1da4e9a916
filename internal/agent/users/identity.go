package users

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Do runs fn with u's identity for the filesystem, so that the kernel
// checks every path fn opens, creates or removes against u's permissions:
// each component, symlinks included, at the moment it is resolved. There
// is no window between a check and a use to race, as there would be if the
// agent resolved a path and judged it itself.
//
// fn runs on an OS thread of its own whose effective uid and gid are u's
// (the real and saved ones stay root's, which is what lets the thread
// become root again) and whose supplementary groups are u's. Linux and
// gVisor keep credentials per thread: the raw setresuid, setresgid and
// setgroups system calls change only the calling thread (libc and Go's
// syscall.Setuid broadcast to every thread), so the rest of the agent stays
// root meanwhile. setfsuid would be narrower, but gVisor does not have it.
// Files fn creates are owned by u. fn must do its filesystem work on its
// own goroutine: another goroutine runs on another thread, as root. What fn
// opens stays usable after Do returns: permissions are checked at open.
//
// When u is the agent's own user, or the agent is not root and so cannot
// take on another identity, fn runs as the agent.
func (u *User) Do(fn func() error) error {
	euid := geteuid()
	if u.UID == euid || euid != 0 {
		return fn()
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		var res result
		restored := false
		defer func() {
			// A thread whose root identity could not be given back must
			// never run anything else: a goroutine that ends locked takes
			// its thread with it.
			if restored {
				runtime.UnlockOSThread()
			}
			done <- res
		}()
		saved, err := become(u)
		if err == nil {
			res = call(fn)
		} else {
			res.err = err
		}
		if err := restore(saved); err != nil {
			if res.err == nil && res.panic == nil {
				res.err = err
			}
			return
		}
		restored = true
	}()
	res := <-done
	if res.panic != nil {
		panic(res.panic)
	}
	return res.err
}

// result is how fn ended: its error, or what it panicked with.
type result struct {
	err   error
	panic any
}

// call runs fn, turning a panic into a value Do re-raises on the caller's
// goroutine, where the HTTP server's recovery can see it.
func call(fn func() error) (res result) {
	defer func() {
		if p := recover(); p != nil {
			res.panic = p
		}
	}()
	res.err = fn()
	return res
}

// savedIdentity is what the thread had before become.
type savedIdentity struct {
	groups     []uint32
	euid, egid uint32
}

// keep is the id argument of setresuid and setresgid that leaves an id as
// it is.
const keep = ^uintptr(0)

// become gives the calling thread u's identity. On failure the thread may
// be half changed; restore still undoes it.
func become(u *User) (savedIdentity, error) {
	var saved savedIdentity
	groups, err := getgroups()
	if err != nil {
		return saved, err
	}
	saved.groups = groups
	saved.euid, saved.egid = geteuid(), getegid()
	if err := setgroups(u.Groups); err != nil {
		return saved, fmt.Errorf("take on the groups of user %s: %w", u.Name, err)
	}
	// The gid first: once the uid is u's, the thread may no longer change it.
	if err := setresgid(u.GID); err != nil || getegid() != u.GID {
		return saved, fmt.Errorf("take on the group of user %s: %w", u.Name, refused(err))
	}
	if err := setresuid(u.UID); err != nil || geteuid() != u.UID {
		return saved, fmt.Errorf("take on the identity of user %s: %w", u.Name, refused(err))
	}
	return saved, nil
}

// restore gives the calling thread back what become saved. The uid goes
// first: it brings back the capabilities that allow the rest.
func restore(s savedIdentity) error {
	if err := setresuid(s.euid); err != nil || geteuid() != s.euid {
		return fmt.Errorf("restore the agent's uid: %w", refused(err))
	}
	if err := setresgid(s.egid); err != nil || getegid() != s.egid {
		return fmt.Errorf("restore the agent's gid: %w", refused(err))
	}
	if err := setgroups(s.groups); err != nil {
		return fmt.Errorf("restore the agent's groups: %w", err)
	}
	return nil
}

// refused is err, or an error saying the change did not take when the
// call said nothing.
func refused(err error) error {
	if err != nil {
		return err
	}
	return errors.New("the identity did not change")
}

// setresuid sets the calling thread's effective uid only.
func setresuid(id uint32) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, keep, uintptr(id), keep); e != 0 {
		return e
	}
	return nil
}

// setresgid sets the calling thread's effective gid only.
func setresgid(id uint32) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, keep, uintptr(id), keep); e != 0 {
		return e
	}
	return nil
}

func geteuid() uint32 {
	id, _, _ := unix.RawSyscall(unix.SYS_GETEUID, 0, 0, 0)
	return uint32(id)
}

func getegid() uint32 {
	id, _, _ := unix.RawSyscall(unix.SYS_GETEGID, 0, 0, 0)
	return uint32(id)
}

// setgroups sets the calling thread's supplementary groups only.
func setgroups(groups []uint32) error {
	var p unsafe.Pointer
	if len(groups) > 0 {
		p = unsafe.Pointer(&groups[0])
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(p), 0); e != 0 {
		return e
	}
	return nil
}

// getgroups reads the calling thread's supplementary groups.
func getgroups() ([]uint32, error) {
	for {
		n, _, e := unix.RawSyscall(unix.SYS_GETGROUPS, 0, 0, 0)
		if e != 0 {
			return nil, fmt.Errorf("read the agent's groups: %w", e)
		}
		if n == 0 {
			return nil, nil
		}
		groups := make([]uint32, n)
		m, _, e := unix.RawSyscall(unix.SYS_GETGROUPS, n, uintptr(unsafe.Pointer(&groups[0])), 0)
		if e == syscall.EINVAL {
			continue // grew in between
		}
		if e != 0 {
			return nil, fmt.Errorf("read the agent's groups: %w", e)
		}
		return groups[:m], nil
	}
}
