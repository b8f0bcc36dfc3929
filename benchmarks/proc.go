package benchmarks

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// child is a running child process of a run and the lines it writes.
type child struct {
	role  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	enc   *json.Encoder
	lines chan childLine // closed at the end of its stdout
	// readErr is set before lines closes when stdout carried something that is not a line.
	readErr error
}

// startChild starts a child for role with the command the runner makes, and sends it first.
// The child is killed with the parent (Pdeathsig where the OS has it), gets SIGTERM when ctx
// ends and SIGKILL if it is still there 10 s later.
func (r *Runner) startChild(ctx context.Context, role string, first parentLine) (*child, error) {
	cmd := r.Command(ctx, role)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	setParentDeathSignal(cmd)
	if cmd.Stderr == nil {
		cmd.Stderr = r.stderr()
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the %s child: %w", role, err)
	}
	c := &child{role: role, cmd: cmd, stdin: stdin, enc: json.NewEncoder(stdin), lines: make(chan childLine, 16)}
	go c.read(stdout)
	if err := c.send(first); err != nil {
		return c, err
	}
	return c, nil
}

func (c *child) send(l parentLine) error {
	if err := c.enc.Encode(l); err != nil {
		return fmt.Errorf("writing to the %s child: %w", c.role, err)
	}
	return nil
}

// read decodes the child's stdout into lines until it ends.
func (c *child) read(stdout io.Reader) {
	defer close(c.lines)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20) // a result carries an encoded histogram
	for sc.Scan() {
		var l childLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			if c.readErr == nil { // the first stray line is the one to report
				c.readErr = fmt.Errorf("the %s child wrote %q: %w", c.role, truncate(sc.Text(), 200), err)
			}
			continue
		}
		c.lines <- l
	}
	if c.readErr == nil {
		c.readErr = sc.Err()
	}
}

// next returns the child's next line that is not progress, passing progress lines to onProgress.
// It fails when the child ends its output first, reports an error, or ctx ends.
func (c *child) next(ctx context.Context, onProgress func(progressLine)) (childLine, error) {
	for {
		select {
		case l, ok := <-c.lines:
			switch {
			case !ok && c.readErr != nil:
				return l, c.readErr
			case !ok:
				return l, fmt.Errorf("the %s child ended its output early", c.role)
			case l.Error != "":
				return l, fmt.Errorf("%s child: %s", c.role, l.Error)
			case l.Progress != nil:
				if onProgress != nil {
					onProgress(*l.Progress)
				}
				continue
			}
			return l, nil
		case <-ctx.Done():
			return childLine{}, fmt.Errorf("waiting for the %s child: %w", c.role, ctx.Err())
		}
	}
}

// wait closes the child's stdin and waits for it to exit. (The children measure their own
// resource use: see selfUsage for why the rusage wait returns is not used.)
func (c *child) wait() error {
	_ = c.stdin.Close()
	for range c.lines { // let the reader finish so that Wait can close the pipe
	}
	if err := c.cmd.Wait(); err != nil {
		return fmt.Errorf("the %s child: %w", c.role, err)
	}
	return nil
}

// kill ends a child that is no longer wanted (a failed run) and reaps it.
func (c *child) kill() {
	if c == nil {
		return
	}
	_ = c.cmd.Process.Kill()
	_ = c.wait()
}

func (r *Runner) stderr() io.Writer {
	if r.Stderr != nil {
		return r.Stderr
	}
	return os.Stderr
}

// SelfCommand returns a Runner.Command that re-executes this program's binary with args and
// the role appended: for the engine binary, args are ["bench", "--child"].
func SelfCommand(args ...string) (func(ctx context.Context, role string) *exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program's binary: %w", err)
	}
	return func(ctx context.Context, role string) *exec.Cmd {
		return exec.CommandContext(ctx, exe, append(append([]string(nil), args...), role)...)
	}, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
