//go:build linux

package main

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// sysEpollPwait2 is epoll_pwait2 (Linux 5.11): epoll_wait with a
// timeout in ns where epoll_wait's is in ms.
const sysEpollPwait2 = 441

// errNoEventLoop says the kernel lacks what the event loop needs; the
// proxy falls back to the Go delay line.
var errNoEventLoop = errors.New("epoll_pwait2 not available")

// startEventLoop listens on a free loopback port and runs the delaying
// proxy to upstream as one event loop on a thread of its own, in raw
// system calls: it waits in epoll_pwait2 for the next readable socket or
// the next chunk due, whichever comes first, so a chunk is stamped when
// its socket wakes the thread and written when its time comes, with no
// goroutine to wake in between (on a busy machine each such wake-up cost
// tens of µs). It returns the address clients dial.
func startEventLoop(delay time.Duration, upstream string) (string, error) {
	up, err := net.ResolveTCPAddr("tcp4", upstream)
	if err != nil {
		return "", err
	}
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return "", err
	}
	var zero syscall.Timespec
	var probe [1]syscall.EpollEvent
	if _, _, e := syscall.Syscall6(sysEpollPwait2, uintptr(epfd), uintptr(unsafe.Pointer(&probe[0])), 1, uintptr(unsafe.Pointer(&zero)), 0, 0); e != 0 {
		syscall.Close(epfd)
		return "", fmt.Errorf("%w: %v", errNoEventLoop, e)
	}
	lfd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		syscall.Close(epfd)
		return "", err
	}
	if err := syscall.Bind(lfd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(lfd)
		syscall.Close(epfd)
		return "", err
	}
	if err := syscall.Listen(lfd, 1024); err != nil {
		syscall.Close(lfd)
		syscall.Close(epfd)
		return "", err
	}
	sa, err := syscall.Getsockname(lfd)
	if err != nil {
		syscall.Close(lfd)
		syscall.Close(epfd)
		return "", err
	}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, lfd, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(lfd)}); err != nil {
		syscall.Close(lfd)
		syscall.Close(epfd)
		return "", err
	}
	l := &eventLoop{
		epfd: epfd, lfd: lfd, delay: delay, sides: map[int32]*side{},
		upstream: &syscall.SockaddrInet4{Port: up.Port}, start: time.Now(),
	}
	copy(l.upstream.Addr[:], up.IP.To4())
	go l.run()
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port), nil
}

type eventLoop struct {
	epfd, lfd int
	delay     time.Duration
	upstream  *syscall.SockaddrInet4
	start     time.Time
	sides     map[int32]*side
	q         []loopChunk // in due order (every chunk waits the same delay), from head on
	head      int
	early     int64 // ns: how long before a chunk is due the loop asks to be woken (see wait)
	buf       [64 << 10]byte
	oob       [128]byte
}

// arrived returns when the bytes just read reached the socket, in the
// loop's clock: the kernel's stamp (SO_TIMESTAMPNS, wall clock) moved to
// it, or now if there is none.
func (l *eventLoop) arrived(oob []byte) int64 {
	now := time.Now()
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return int64(now.Sub(l.start))
	}
	for _, m := range msgs {
		if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SO_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(syscall.Timespec{})) {
			ts := (*syscall.Timespec)(unsafe.Pointer(&m.Data[0]))
			age := now.UnixNano() - ts.Nano()
			if age >= 0 && age < int64(time.Second) { // a wall clock that jumped is not believed
				return int64(now.Sub(l.start)) - age
			}
		}
	}
	return int64(now.Sub(l.start))
}

// side is one socket of a proxied connection: the client's, or the one
// to Redis.
type side struct {
	fd        int
	peer      *side
	out       []byte // accepted for writing, not yet taken by the kernel
	shutAfter bool   // shut the socket for writing once out is written
	readDone  bool   // its reading side has ended
	wroteEOF  bool   // its writing side has been shut
	closed    bool
	wantOut   bool // EPOLLOUT is asked for
}

type loopChunk struct {
	due int64 // ns since the loop's start
	dst *side
	b   []byte
	eof bool
}

func (l *eventLoop) now() int64 { return int64(time.Since(l.start)) }

func (l *eventLoop) run() {
	runtime.LockOSThread() // never unlocked: the thread's timer slack stays with it
	preciseThread()
	events := make([]syscall.EpollEvent, 256)
	for {
		var tsp *syscall.Timespec
		var asked, called int64
		if l.head < len(l.q) {
			called = l.now()
			asked = max(l.q[l.head].due-l.early-called, 0)
			ts := syscall.NsecToTimespec(asked)
			tsp = &ts
		}
		n, _, e := syscall.Syscall6(sysEpollPwait2, uintptr(l.epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(unsafe.Pointer(tsp)), 0, 0)
		if e != 0 && e != syscall.EINTR {
			panic(fmt.Sprintf("bench delay proxy: epoll_pwait2: %v", e))
		}
		if e != 0 {
			n = 0
		}
		if n == 0 && asked > 0 {
			l.learn(l.now() - called - asked)
		}
		for _, ev := range events[:n] {
			if int(ev.Fd) == l.lfd {
				l.accept()
				continue
			}
			s := l.sides[ev.Fd]
			if s == nil || s.closed {
				continue
			}
			if ev.Events&syscall.EPOLLOUT != 0 {
				l.flush(s)
			}
			if ev.Events&(syscall.EPOLLIN|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 && !s.readDone && !s.closed {
				l.read(s)
			}
		}
		l.deliver()
	}
}

// The kernel wakes a sleeping thread some tens of µs after its timeout
// on the VMs this runs on (a nanosleep of 500 µs: 47 µs late at the
// median, 67 at p90), twice per round trip. So the loop asks to be woken
// that much early, as learnt from its recent wake-ups, and polls (epoll
// with no timeout, so reads are still stamped as they come) until the
// chunk is due: a chunk is still never written early, and the loop busy
// waits only for what is left of that margin.
const (
	earlyMax   = 150 * time.Microsecond // the most the margin may grow to
	earlyShift = 4                      // the margin follows 1/16 of each wake-up's lateness
)

// learn moves the margin toward the lateness of one wake-up.
func (l *eventLoop) learn(late int64) {
	l.early += (min(max(late, 0), int64(earlyMax)) - l.early) >> earlyShift
}

func (l *eventLoop) accept() {
	for {
		cfd, _, err := syscall.Accept4(l.lfd, syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
		if err != nil {
			return // EAGAIN: none left
		}
		ufd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err == nil {
			// Blocking connect on loopback: it is done at once.
			if err = syscall.Connect(ufd, l.upstream); err != nil {
				syscall.Close(ufd)
			}
		}
		if err != nil {
			syscall.Close(cfd)
			continue
		}
		_ = syscall.SetNonblock(ufd, true)
		c, u := &side{fd: cfd}, &side{fd: ufd}
		c.peer, u.peer = u, c
		for _, s := range []*side{c, u} {
			_ = syscall.SetsockoptInt(s.fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
			// The kernel stamps what arrives: a chunk's delay runs from
			// then, not from when this thread woke to read it.
			_ = syscall.SetsockoptInt(s.fd, syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
			l.sides[int32(s.fd)] = s
			_ = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, s.fd, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(s.fd)})
		}
	}
}

// read takes what s has to read, once (the epoll is level-triggered: what
// is left wakes it again), and puts it on the line for s's peer.
func (l *eventLoop) read(s *side) {
	n, oobn, _, _, err := syscall.Recvmsg(s.fd, l.buf[:], l.oob[:], 0)
	if err == syscall.EAGAIN || err == syscall.EINTR {
		return
	}
	due := l.arrived(l.oob[:max(oobn, 0)]) + int64(l.delay)
	if n > 0 {
		l.q = append(l.q, loopChunk{due: due, dst: s.peer, b: append([]byte(nil), l.buf[:n]...)})
		return
	}
	// The end of what s sends (or an error): its peer is shut for writing
	// when the line has delivered everything before.
	s.readDone = true
	l.interest(s)
	l.q = append(l.q, loopChunk{due: due, dst: s.peer, eof: true})
}

// deliver writes every chunk that is due.
func (l *eventLoop) deliver() {
	now := l.now()
	for ; l.head < len(l.q) && l.q[l.head].due <= now; l.head++ {
		c := l.q[l.head]
		l.q[l.head] = loopChunk{}
		lateness.add(time.Duration(now - c.due))
		d := c.dst
		if d.closed {
			continue
		}
		if c.eof {
			d.shutAfter = true
		} else {
			d.out = append(d.out, c.b...)
		}
		l.flush(d)
	}
	if l.head == len(l.q) {
		l.q, l.head = l.q[:0], 0
	} else if l.head > 4096 && l.head > len(l.q)/2 {
		l.q, l.head = append(l.q[:0], l.q[l.head:]...), 0
	}
}

// flush writes what d holds, shuts it for writing when its peer has ended,
// and closes the pair once both ways are done.
func (l *eventLoop) flush(d *side) {
	for len(d.out) > 0 {
		n, err := syscall.SendmsgN(d.fd, d.out, nil, nil, syscall.MSG_NOSIGNAL)
		if err == syscall.EAGAIN {
			break
		}
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			l.closePair(d)
			return
		}
		d.out = d.out[n:]
	}
	if len(d.out) == 0 {
		d.out = nil
		if d.shutAfter && !d.wroteEOF {
			d.wroteEOF = true
			_ = syscall.Shutdown(d.fd, syscall.SHUT_WR)
		}
	}
	l.interest(d)
	if d.wroteEOF && d.peer.wroteEOF {
		l.closePair(d)
	}
}

// interest asks epoll for what s still waits for: reading until its end,
// writing while it holds bytes the kernel did not take.
func (l *eventLoop) interest(s *side) {
	if s.closed {
		return
	}
	var ev uint32
	if !s.readDone {
		ev |= syscall.EPOLLIN
	}
	s.wantOut = len(s.out) > 0
	if s.wantOut {
		ev |= syscall.EPOLLOUT
	}
	_ = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_MOD, s.fd, &syscall.EpollEvent{Events: ev, Fd: int32(s.fd)})
}

func (l *eventLoop) closePair(s *side) {
	for _, x := range []*side{s, s.peer} {
		if x.closed {
			continue
		}
		x.closed = true
		x.out = nil
		_ = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_DEL, x.fd, nil)
		delete(l.sides, int32(x.fd))
		syscall.Close(x.fd)
	}
}
