//go:build !linux

package numa

// ProcEvents delivers the kernel's process events; it exists on Linux only.
type ProcEvents struct{}

// OpenProcEvents fails: the proc connector is Linux's.
func OpenProcEvents() (*ProcEvents, error) { return nil, errNotLinux }

// Events returns a closed channel.
func (p *ProcEvents) Events() <-chan ProcEvent {
	ch := make(chan ProcEvent)
	close(ch)
	return ch
}

// Close does nothing.
func (p *ProcEvents) Close() error { return nil }
