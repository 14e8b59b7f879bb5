//go:build !linux

package emulator

import (
	"errors"

	"github.com/numapref/numapref/internal/numa"
)

// Emulator emulates PR_PREFERRED_NID; it works on Linux only.
type Emulator struct{}

var errNotLinux = errors.New("emulator: not supported on this operating system")

// New fails: the emulator reads Linux's /proc.
func New(Options) (*Emulator, error) { return nil, errNotLinux }

func (e *Emulator) Get(int) (int, error) { return numa.NoNode, numa.ErrUnsupported }
func (e *Emulator) Set(int, int) error   { return numa.ErrUnsupported }
func (e *Emulator) Call(int, int, int, numa.UserPointer) (int, error) {
	return numa.PointerSentinel, numa.ErrUnsupported
}
func (e *Emulator) SchedNUMA(int) (numa.SchedNUMA, error) {
	return numa.SchedNUMA{}, numa.ErrUnsupported
}
func (e *Emulator) Support() numa.Support {
	return numa.Support{Backend: "emulator", Reason: "not Linux"}
}
func (e *Emulator) Stats() Stats { return Stats{} }
func (e *Emulator) Close() error { return nil }
