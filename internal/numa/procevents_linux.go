// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

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
	// kinds are the event kinds the socket's filter lets through (all when empty).
	kinds []ProcEventKind
	// events is the last read's, reused by the next.
	events []ProcEvent
}

// subscribeTimeout bounds the wait for the kernel's answer to a subscription. Without
// CAP_NET_ADMIN the kernel refuses, and when nobody else listens it does not even answer.
const subscribeTimeout = 2 * time.Second

// DialProcConnector opens a proc connector socket and subscribes to events of kinds (every
// kind when none is given; every fork until FilterForks): a socket filter drops the others
// in the kernel, before they wake the reader. It needs CAP_NET_ADMIN and a kernel with
// CONFIG_PROC_EVENTS.
func DialProcConnector(kinds ...ProcEventKind) (*ProcConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_CONNECTOR)
	if err != nil {
		return nil, fmt.Errorf("opening proc connector socket: %w", err)
	}
	// A large buffer makes overflow (ENOBUFS, lost events) rare on busy machines.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20) != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
	}
	// Before the bind: no event the filter drops is ever queued.
	if err := attachFilter(fd, kinds, ForkFilter{}); err != nil {
		unix.Close(fd)
		return nil, err
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
	c := &ProcConn{f: f, raw: raw, buf: make([]byte, 64<<10), seq: uint32(os.Getpid())<<8 | uint32(time.Now().UnixNano()&0xff),
		kinds: slices.Clone(kinds)}
	if err := c.subscribe(); err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// attachFilter sets fd's socket filter to procFilter(kinds, forks); it replaces the one
// before at once.
func attachFilter(fd int, kinds []ProcEventKind, forks ForkFilter) error {
	raw, err := procFilter(kinds, forks)
	if err != nil {
		return fmt.Errorf("building the proc connector's filter: %w", err)
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, ins := range raw {
		prog[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog); err != nil {
		return fmt.Errorf("attaching the proc connector's filter: %w", err)
	}
	return nil
}

// FilterForks makes the kernel pass only the forks f names, from now on (the events
// already queued stay). The socket must have been dialed with forks among its kinds.
func (c *ProcConn) FilterForks(f ForkFilter) error {
	var err error
	if cerr := c.raw.Control(func(fd uintptr) { err = attachFilter(int(fd), c.kinds, f) }); cerr != nil {
		return fmt.Errorf("filtering proc connector forks: %w", cerr)
	}
	return err
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

// Read returns the fork, exec and exit events of every datagram queued, waiting for one;
// it may return none (datagrams of other events). The slice is reused by the next Read.
// Each time it finds the socket empty it calls idle (if not nil) with a CLOCK_MONOTONIC
// time taken before the empty read: every event the kernel queued before that time has
// been returned by an earlier Read. An overflowed socket yields one ProcEventLost, after
// the events read before it. One goroutine reads at a time.
func (c *ProcConn) Read(idle func(now int64)) ([]ProcEvent, error) {
	events, err := c.read(idle)
	return slices.DeleteFunc(events, func(ev ProcEvent) bool {
		return ev.Kind == procEventAck || ev.Kind == procEventComm
	}), err
}

// maxDatagramsPerRead bounds the datagrams one read drains, so a storm that queues them
// as fast as they are read still lets the caller act on what it has.
const maxDatagramsPerRead = 256

// read is Read with every event, the subscription's acknowledgement and COMM events
// included. It drains the socket: one wake-up for a burst of datagrams.
func (c *ProcConn) read(idle func(now int64)) ([]ProcEvent, error) {
	c.events = c.events[:0]
	datagrams := 0
	var recvErr, parseErr error
	err := c.raw.Read(func(fd uintptr) bool {
		for datagrams < maxDatagramsPerRead {
			now := monotonicNow()
			var n int
			n, _, recvErr = unix.Recvfrom(int(fd), c.buf, unix.MSG_DONTWAIT)
			switch recvErr {
			case nil:
				datagrams++
				c.events, parseErr = appendProcMessages(c.events, c.buf[:n])
				if parseErr != nil {
					return true
				}
				continue
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				if datagrams > 0 {
					// Return what was read; the next read finds the socket empty and says
					// so, once the caller has handled these.
					recvErr = nil
					return true
				}
				if idle != nil {
					idle(now)
				}
				return false
			}
			return true
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if recvErr == unix.ENOBUFS {
		return append(c.events, ProcEvent{Kind: ProcEventLost}), nil
	}
	if recvErr != nil {
		return nil, fmt.Errorf("reading proc events: %w", recvErr)
	}
	return c.events, parseErr
}

// StopReading makes a Read that waits, and every later one, return an error
// (os.ErrDeadlineExceeded), for a reader that ends before the socket is closed.
func (c *ProcConn) StopReading() error { return c.f.SetReadDeadline(time.Unix(1, 0)) }

// Close unsubscribes and closes the socket.
func (c *ProcConn) Close() error {
	_ = c.send(procCnMcastIgnore)
	return c.f.Close()
}

func monotonicNow() int64 {
	ns, _ := MonotonicNs()
	return int64(ns)
}

// ProcEvents delivers the kernel's process events (fork, exec, exit) from the netlink proc
// connector.
type ProcEvents struct {
	c      *ProcConn
	events chan ProcEvent
	done   chan struct{}
	once   sync.Once
}

// OpenProcEvents subscribes to the proc connector for events of kinds (every kind when
// none is given; see DialProcConnector). It needs CAP_NET_ADMIN and a kernel with
// CONFIG_PROC_EVENTS.
func OpenProcEvents(kinds ...ProcEventKind) (*ProcEvents, error) {
	c, err := DialProcConnector(kinds...)
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

// FilterForks makes the kernel pass only the forks f names (see ProcConn.FilterForks).
func (p *ProcEvents) FilterForks(f ForkFilter) error { return p.c.FilterForks(f) }

// Close unsubscribes and closes the socket.
func (p *ProcEvents) Close() error {
	var err error
	p.once.Do(func() {
		close(p.done)
		err = p.c.Close()
	})
	return err
}
