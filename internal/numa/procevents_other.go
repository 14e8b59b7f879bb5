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
