package benchmarks

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill the child if the harness dies, so that no target
// or publisher outlives an interrupted invocation.
func setParentDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
