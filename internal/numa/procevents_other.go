// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package numa

// ProcEvents delivers the kernel's process events; it exists on Linux only.
type ProcEvents struct{}

// OpenProcEvents fails: the proc connector is Linux's.
func OpenProcEvents(...ProcEventKind) (*ProcEvents, error) { return nil, errNotLinux }

// FilterForks fails: the proc connector is Linux's.
func (p *ProcEvents) FilterForks(ForkFilter) error { return errNotLinux }

// Events returns a closed channel.
func (p *ProcEvents) Events() <-chan ProcEvent {
	ch := make(chan ProcEvent)
	close(ch)
	return ch
}

// Close does nothing.
func (p *ProcEvents) Close() error { return nil }

// ProcConn is a proc connector socket; it exists on Linux only.
type ProcConn struct{}

// DialProcConnector fails: the proc connector is Linux's.
func DialProcConnector(...ProcEventKind) (*ProcConn, error) { return nil, errNotLinux }

// Read fails: the proc connector is Linux's.
func (c *ProcConn) Read(func(now int64)) ([]ProcEvent, error) { return nil, errNotLinux }

// FilterForks fails: the proc connector is Linux's.
func (c *ProcConn) FilterForks(ForkFilter) error { return errNotLinux }

// StopReading does nothing.
func (c *ProcConn) StopReading() error { return nil }

// Close does nothing.
func (c *ProcConn) Close() error { return nil }
