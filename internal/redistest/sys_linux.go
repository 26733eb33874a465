//go:build linux

package redistest

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// canRunRedis reports whether this platform can run and signal redis-server.
const canRunRedis = true

// procAttr makes the kernel kill a redis-server whose test binary died
// without running its cleanups (a panic, a go test -timeout), so no server
// outlives the test run. Pdeathsig fires when the thread that started the
// child exits; Go only retires threads locked with LockOSThread, which the
// harness never does.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

func stopProcess(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }
func contProcess(p *os.Process) error { return p.Signal(syscall.SIGCONT) }

// awaitStopped waits, up to a second, until the kernel shows the process as
// stopped, so a command sent right after Pause cannot slip in before the
// SIGSTOP lands.
func awaitStopped(p *os.Process) {
	stat := "/proc/" + strconv.Itoa(p.Pid) + "/stat"
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(stat)
		if err != nil {
			return
		}
		// The state follows the command name, which is in parentheses and
		// may itself contain spaces or parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			return
		}
	}
}
