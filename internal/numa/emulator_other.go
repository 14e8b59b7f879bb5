//go:build !linux

package numa

// Emulator emulates PR_PREFERRED_NID; it works on Linux only.
type Emulator struct{}

// NewEmulator fails: the emulator reads Linux's /proc.
func NewEmulator(EmulatorOptions) (*Emulator, error) { return nil, errNotLinux }

func (e *Emulator) Get(int) (int, error) { return NoNode, ErrUnsupported }
func (e *Emulator) Set(int, int) error   { return ErrUnsupported }
func (e *Emulator) Call(int, int, int, UserPointer) (int, error) {
	return PointerSentinel, ErrUnsupported
}
func (e *Emulator) SchedNUMA(int) (SchedNUMA, error) { return SchedNUMA{}, ErrUnsupported }
func (e *Emulator) Support() Support {
	return Support{Backend: "emulator", Reason: "not Linux"}
}
func (e *Emulator) Stats() EmulatorStats { return EmulatorStats{} }
func (e *Emulator) Close() error         { return nil }
