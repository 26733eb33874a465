package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	// readyTimeout bounds the wait for a started redis-server to answer.
	// A healthy one answers within milliseconds; this only has to outlast a
	// loaded CI machine.
	readyTimeout = 30 * time.Second
	// exitTimeout bounds the wait for a killed redis-server to be reaped.
	exitTimeout = 10 * time.Second
	// launchAttempts is how often a server is started before a port taken
	// by someone else counts as a failure.
	launchAttempts = 5
	// logName is the file in a server's directory that gets its stdout and
	// stderr, so failures can quote it.
	logName = "redis.log"
)

// errPortInUse marks a redis-server that exited because its port was taken.
var errPortInUse = errors.New("redistest: address already in use")

// spec says how to run one redis-server; Restart runs the same spec again.
type spec struct {
	bin  string
	port int
	dir  string   // working directory, a t.TempDir
	pre  []string // arguments before the options: a config file, --sentinel
	data bool     // a data node (not a sentinel): turn persistence off
	args []string // extra options, e.g. for Cluster or replication
}

func (sp spec) addr() string { return "127.0.0.1:" + strconv.Itoa(sp.port) }

func (sp spec) argv() []string {
	argv := append([]string(nil), sp.pre...)
	argv = append(argv,
		"--port", strconv.Itoa(sp.port),
		"--bind", "127.0.0.1",
		"--dir", sp.dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--logfile", "",
	)
	if sp.data {
		argv = append(argv,
			"--save", "",
			"--appendonly", "no",
			// Replicas sync at once instead of after the default 5 s that
			// waits for more replicas to share one transfer.
			"--repl-diskless-sync-delay", "0",
		)
	}
	return append(argv, sp.args...)
}

// process is one running redis-server. Its only goroutine waits for the
// process to exit and ends when it does; kill makes that happen.
type process struct {
	cmd     *exec.Cmd
	addr    string
	logPath string
	logFrom int64         // where this run's output starts in the log
	exited  chan struct{} // closed once the process is reaped
	waitErr error         // why it exited; read only after exited is closed
	// ready is when it first answered: the server's own start, from
	// which it counts its uptime, is no later.
	ready time.Time
}

// launch starts sp and waits until it answers. On error nothing is left
// running.
func launch(sp spec) (*process, error) {
	logPath := filepath.Join(sp.dir, logName)
	// Output goes to a file, not a pipe: exec then starts no copying
	// goroutines, and a fork child that keeps the descriptor open (a
	// replication transfer) cannot hold up Wait.
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("redistest: open server log: %w", err)
	}
	defer logFile.Close()
	from, err := logFile.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, fmt.Errorf("redistest: open server log: %w", err)
	}

	cmd := exec.Command(sp.bin, sp.argv()...)
	cmd.Dir = sp.dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redistest: start redis-server: %w", err)
	}
	p := &process{
		cmd:     cmd,
		addr:    sp.addr(),
		logPath: logPath,
		logFrom: from,
		exited:  make(chan struct{}),
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	if err := p.awaitReady(); err != nil {
		if kerr := p.kill(); kerr != nil {
			err = errors.Join(err, kerr)
		}
		return nil, err
	}
	p.ready = time.Now()
	return p, nil
}

// awaitReady polls until the server answers PING and reports this
// process's pid, so a stranger that holds the port does not pass for it.
func (p *process) awaitReady() error {
	deadline := time.Now().Add(readyTimeout)
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for {
		// A server that died (say, on a taken port) is noticed before
		// asking the port, where a stranger might keep us waiting.
		select {
		case <-p.exited:
		default:
			if p.answers() {
				return nil
			}
		}
		select {
		case <-p.exited:
			out := p.output()
			if strings.Contains(out, "Address already in use") {
				return fmt.Errorf("%w: port of %s", errPortInUse, p.addr)
			}
			return fmt.Errorf("redistest: redis-server on %s exited before it was ready (%v); its output ends:\n%s",
				p.addr, p.waitErr, out)
		case <-poll.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: redis-server on %s did not answer PING within %v; its output ends:\n%s",
				p.addr, readyTimeout, p.output())
		}
	}
}

// answers reports whether the server on p.addr answers PING and is this
// process. It speaks raw RESP to stay free of client pools and goroutines.
func (p *process) answers() bool {
	conn, err := net.DialTimeout("tcp", p.addr, 250*time.Millisecond)
	if err != nil {
		return false
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(250 * time.Millisecond)); err != nil {
		return false
	}
	if _, err := io.WriteString(conn, "PING\r\nINFO server\r\n"); err != nil {
		return false
	}
	r := bufio.NewReader(conn)
	if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
		return false
	}
	line, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "$") {
		return false
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 0 {
		return false
	}
	info := make([]byte, n)
	if _, err := io.ReadFull(r, info); err != nil {
		return false
	}
	return strings.Contains(string(info), "\nprocess_id:"+strconv.Itoa(p.cmd.Process.Pid)+"\r\n")
}

// kill resumes the process if it is stopped (so it never lingers stopped
// should SIGKILL somehow not reap it), kills it and waits until it is gone.
func (p *process) kill() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = contProcess(p.cmd.Process)
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("redistest: kill redis-server on %s: %w", p.addr, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(exitTimeout):
		return fmt.Errorf("redistest: redis-server on %s (pid %d) still running %v after SIGKILL",
			p.addr, p.cmd.Process.Pid, exitTimeout)
	}
}

// output returns the end of what this run of the server printed.
func (p *process) output() string {
	return logTail(p.logPath, p.logFrom)
}

// logTail returns at most the last 20 lines (and 4 KiB) of the file at
// path that lie past offset from.
func logTail(path string, from int64) string {
	const maxBytes, maxLines = 4096, 20
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no output: %v)", err)
	}
	defer f.Close()
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Sprintf("(no output: %v)", err)
	}
	start := max(from, end-maxBytes)
	buf := make([]byte, end-start)
	if _, err := f.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("(no output: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	out := strings.Join(lines, "\n")
	if out == "" {
		return "(no output)"
	}
	return out
}
