//go:build linux

package numa

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ProcConn is a netlink socket subscribed to the proc connector, for a reader that must
// know when it has handled every event queued so far (see Read). ProcEvents is the simpler
// stream of events built on it.
type ProcConn struct {
	f   *os.File
	raw syscall.RawConn
	buf []byte
	seq uint32
}

// subscribeTimeout bounds the wait for the kernel's answer to a subscription. Without
// CAP_NET_ADMIN the kernel refuses, and when nobody else listens it does not even answer.
const subscribeTimeout = 2 * time.Second

// DialProcConnector opens a proc connector socket and subscribes to all events. It needs
// CAP_NET_ADMIN and a kernel with CONFIG_PROC_EVENTS.
func DialProcConnector() (*ProcConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_CONNECTOR)
	if err != nil {
		return nil, fmt.Errorf("opening proc connector socket: %w", err)
	}
	// A large buffer makes overflow (ENOBUFS, lost events) rare on busy machines.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("binding proc connector socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), "proc-connector")
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("proc connector socket: %w", err)
	}
	c := &ProcConn{f: f, raw: raw, buf: make([]byte, 64<<10), seq: uint32(os.Getpid())<<8 | uint32(time.Now().UnixNano()&0xff)}
	if err := c.subscribe(); err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

func (c *ProcConn) send(op uint32) error {
	c.seq++
	msg := appendListenMessage(nil, c.seq, op)
	var sendErr error
	err := c.raw.Write(func(fd uintptr) bool {
		sendErr = unix.Sendto(int(fd), msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return sendErr != unix.EAGAIN
	})
	if err == nil {
		err = sendErr
	}
	return err
}

func (c *ProcConn) subscribe() error {
	if err := c.send(procCnMcastListen); err != nil {
		return fmt.Errorf("subscribing to proc events: %w", err)
	}
	want := c.seq
	if err := c.f.SetReadDeadline(time.Now().Add(subscribeTimeout)); err != nil {
		return fmt.Errorf("subscribing to proc events: %w", err)
	}
	// It can only fail on a closed file (the deadline above was taken), whose reads fail anyway.
	defer func() { _ = c.f.SetReadDeadline(time.Time{}) }()
	for {
		events, err := c.read(nil)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("subscribing to proc events: no answer from the kernel within %v (needs CAP_NET_ADMIN and CONFIG_PROC_EVENTS)", subscribeTimeout)
		}
		if err != nil {
			return fmt.Errorf("subscribing to proc events: %w", err)
		}
		for _, ev := range events {
			if ev.Kind != procEventAck || ev.ackAck != want+1 {
				continue
			}
			if ev.ackErr != 0 {
				return fmt.Errorf("subscribing to proc events: %w", unix.Errno(ev.ackErr))
			}
			return nil
		}
	}
}

// Read returns the fork, exec and exit events of the next datagram, waiting for one; it
// may return none (a datagram of other events). Each time it finds the socket empty it
// calls idle (if not nil) with a CLOCK_MONOTONIC time taken before the empty read: every
// event the kernel queued before that time has been returned by an earlier Read. An
// overflowed socket yields one ProcEventLost. One goroutine reads at a time.
func (c *ProcConn) Read(idle func(now int64)) ([]ProcEvent, error) {
	events, err := c.read(idle)
	return slices.DeleteFunc(events, func(ev ProcEvent) bool {
		return ev.Kind == procEventAck || ev.Kind == procEventComm
	}), err
}

// read is Read with every event, the subscription's acknowledgement and COMM events
// included.
func (c *ProcConn) read(idle func(now int64)) ([]ProcEvent, error) {
	var n int
	var recvErr error
	err := c.raw.Read(func(fd uintptr) bool {
		for {
			now := monotonicNow()
			n, _, recvErr = unix.Recvfrom(int(fd), c.buf, unix.MSG_DONTWAIT)
			switch recvErr {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				if idle != nil {
					idle(now)
				}
				return false
			}
			return true
		}
	})
	if err != nil {
		return nil, err
	}
	if recvErr == unix.ENOBUFS {
		return []ProcEvent{{Kind: ProcEventLost}}, nil
	}
	if recvErr != nil {
		return nil, fmt.Errorf("reading proc events: %w", recvErr)
	}
	return parseProcMessages(c.buf[:n])
}

// Close unsubscribes and closes the socket.
func (c *ProcConn) Close() error {
	_ = c.send(procCnMcastIgnore)
	return c.f.Close()
}

func monotonicNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// ProcEvents delivers the kernel's process events (fork, exec, exit) from the netlink proc
// connector.
type ProcEvents struct {
	c      *ProcConn
	events chan ProcEvent
	done   chan struct{}
	once   sync.Once
}

// OpenProcEvents subscribes to the proc connector. It needs CAP_NET_ADMIN and a kernel
// with CONFIG_PROC_EVENTS.
func OpenProcEvents() (*ProcEvents, error) {
	c, err := DialProcConnector()
	if err != nil {
		return nil, err
	}
	p := &ProcEvents{c: c, events: make(chan ProcEvent, 1024), done: make(chan struct{})}
	go p.run()
	return p, nil
}

// Events returns the event stream. It is closed after Close or when reading fails. A slow
// reader makes the kernel drop events; that shows up as one ProcEventLost.
func (p *ProcEvents) Events() <-chan ProcEvent { return p.events }

func (p *ProcEvents) run() {
	defer close(p.events)
	for {
		events, err := p.c.Read(nil)
		if err != nil {
			return
		}
		for _, ev := range events {
			select {
			case p.events <- ev:
			case <-p.done:
				return
			}
		}
	}
}

// Close unsubscribes and closes the socket.
func (p *ProcEvents) Close() error {
	var err error
	p.once.Do(func() {
		close(p.done)
		err = p.c.Close()
	})
	return err
}
