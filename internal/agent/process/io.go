package process

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"syscall"

	"connectrpc.com/connect"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/proto/process"
)

// defaultSize is used when a PTY is requested without a size.
var defaultSize = winsize{cols: 80, rows: 24}

type winsize struct{ cols, rows uint16 }

// ptySize validates a requested terminal size; a nil size is allowed only
// at start, where it means defaultSize.
func ptySize(sz *process.PTY_Size, allowNil bool) (winsize, error) {
	if sz == nil {
		if allowNil {
			return defaultSize, nil
		}
		return winsize{}, connect.NewError(connect.CodeInvalidArgument, errors.New("pty.size is required"))
	}
	if sz.GetCols() == 0 || sz.GetRows() == 0 || sz.GetCols() > math.MaxUint16 || sz.GetRows() > math.MaxUint16 {
		return winsize{}, connect.NewError(connect.CodeInvalidArgument,
			fmt.Errorf("invalid pty size %dx%d: cols and rows must be 1..%d", sz.GetCols(), sz.GetRows(), math.MaxUint16))
	}
	return winsize{cols: uint16(sz.GetCols()), rows: uint16(sz.GetRows())}, nil
}

// output is one stream the agent reads from the process.
type output struct {
	f     *os.File
	chunk int
	wrap  func([]byte) *process.ProcessEvent_DataEvent
}

// procIO is the agent's side of a started process's standard streams.
type procIO struct {
	outputs []output
	stdin   *os.File // write end of the stdin pipe; nil without one
	tty     *os.File // PTY master; nil for pipe processes
}

func (pio procIO) files() []*os.File {
	fs := make([]*os.File, len(pio.outputs))
	for i, o := range pio.outputs {
		fs[i] = o.f
	}
	return fs
}

// startIO wires the process's streams (a PTY of the given size, or pipes)
// and starts it. The agent's ends are non-blocking, so reads can be given
// deadlines and blocked writes can be abandoned.
func startIO(cmd *exec.Cmd, size *winsize, withStdin bool) (procIO, error) {
	if size != nil {
		return startPTY(cmd, *size)
	}
	return startPipes(cmd, withStdin)
}

func startPipes(cmd *exec.Cmd, withStdin bool) (pio procIO, err error) {
	var agentEnds, childEnds []*os.File
	defer func() {
		// The child holds its own copies once started; the agent's ends
		// are only kept on success.
		closeAll(childEnds)
		if err != nil {
			closeAll(agentEnds)
		}
	}()
	pipe := func(childReads bool) (agentEnd, childEnd *os.File, err error) {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, nil, err
		}
		agentEnd, childEnd = r, w
		if childReads {
			agentEnd, childEnd = w, r
		}
		agentEnds, childEnds = append(agentEnds, agentEnd), append(childEnds, childEnd)
		return agentEnd, childEnd, nil
	}
	stdout, childStdout, err := pipe(false)
	if err != nil {
		return pio, err
	}
	stderr, childStderr, err := pipe(false)
	if err != nil {
		return pio, err
	}
	cmd.Stdout, cmd.Stderr = childStdout, childStderr
	if withStdin {
		var childStdin *os.File
		if pio.stdin, childStdin, err = pipe(true); err != nil {
			return pio, err
		}
		cmd.Stdin = childStdin
	}
	if err := cmd.Start(); err != nil {
		return pio, err
	}
	pio.outputs = []output{
		{f: stdout, chunk: pipeChunk, wrap: func(b []byte) *process.ProcessEvent_DataEvent {
			return &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: b}}
		}},
		{f: stderr, chunk: pipeChunk, wrap: func(b []byte) *process.ProcessEvent_DataEvent {
			return &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stderr{Stderr: b}}
		}},
	}
	return pio, nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

func startPTY(cmd *exec.Cmd, size winsize) (procIO, error) {
	master, tty, err := pty.Open()
	if err != nil {
		return procIO{}, err
	}
	defer tty.Close()
	// pty.Open leaves the master in blocking mode; a non-blocking duplicate
	// lets the runtime poller apply deadlines to it.
	m, err := nonBlocking(master)
	if err != nil {
		return procIO{}, err
	}
	if err := setSize(m, size); err != nil {
		_ = m.Close()
		return procIO{}, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr.Setctty = true // fd 0 of the child becomes its controlling tty
	if err := cmd.Start(); err != nil {
		_ = m.Close()
		return procIO{}, err
	}
	return procIO{
		tty: m,
		outputs: []output{{f: m, chunk: ptyChunk, wrap: func(b []byte) *process.ProcessEvent_DataEvent {
			return &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Pty{Pty: b}}
		}}},
	}, nil
}

// nonBlocking returns a non-blocking duplicate of f and closes f.
func nonBlocking(f *os.File) (*os.File, error) {
	defer f.Close()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// setSize resizes the terminal without f.Fd, which would switch the file
// back to blocking mode.
func setSize(f *os.File, size winsize) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ioErr error
	err = rc.Control(func(fd uintptr) {
		ioErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: size.cols, Row: size.rows})
	})
	if err != nil {
		return err
	}
	return ioErr
}
