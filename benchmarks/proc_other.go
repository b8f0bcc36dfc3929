//go:build !linux

package benchmarks

import "os/exec"

// setParentDeathSignal does nothing where the OS has no parent-death signal: a target child
// still stops when its stdin closes.
func setParentDeathSignal(*exec.Cmd) {}
