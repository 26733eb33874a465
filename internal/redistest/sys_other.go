//go:build !unix

package redistest

import (
	"errors"
	"os"
	"syscall"
)

// canRunRedis is false where a process cannot be stopped and continued,
// which Pause and Resume need; the harness uses miniredis there.
const canRunRedis = false

func procAttr() *syscall.SysProcAttr { return nil }

func stopProcess(*os.Process) error { return errors.ErrUnsupported }
func contProcess(*os.Process) error { return errors.ErrUnsupported }

func awaitStopped(*os.Process) {}
