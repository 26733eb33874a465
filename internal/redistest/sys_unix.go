//go:build unix && !linux

package redistest

import (
	"os"
	"syscall"
)

// canRunRedis reports whether this platform can run and signal redis-server.
const canRunRedis = true

// procAttr has nothing to add here: only Linux can tie a child's life to
// its parent, so a test binary killed outright may leave servers behind.
func procAttr() *syscall.SysProcAttr { return nil }

func stopProcess(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }
func contProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }

// awaitStopped cannot see a process's state here without /proc; a signal
// is delivered long before a command crosses loopback, in practice.
func awaitStopped(*os.Process) {}
