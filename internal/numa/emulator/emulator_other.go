// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package emulator

import (
	"errors"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/prctl"
)

// Emulator emulates PR_PREFERRED_NID; it works on Linux only.
type Emulator struct{}

var errNotLinux = errors.New("emulator: not supported on this operating system")

// New fails: the emulator reads Linux's /proc.
func New(Options) (*Emulator, error) { return nil, errNotLinux }

func (e *Emulator) Get(int) (int, error) { return numa.NoNode, prctl.ErrUnsupported }
func (e *Emulator) Set(int, int) error   { return prctl.ErrUnsupported }
func (e *Emulator) Call(int, int, int, prctl.UserPointer) (int, error) {
	return prctl.PointerSentinel, prctl.ErrUnsupported
}
func (e *Emulator) SchedNUMA(int) (numa.SchedNUMA, error) {
	return numa.SchedNUMA{}, prctl.ErrUnsupported
}
func (e *Emulator) Support() numa.Support {
	return numa.Support{Backend: "emulator", Reason: "not Linux"}
}
func (e *Emulator) Stats() Stats { return Stats{} }
func (e *Emulator) Close() error { return nil }
