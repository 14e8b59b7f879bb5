package sandbox

// Options says what the filter keeps allowed beyond the agent's defaults.
type Options struct {
	// AllowKcmp keeps kcmp(2): the emulated kernel tells a CLONE_VM child from a fork()
	// child with kcmp(KCMP_VM). The real kernel's backend never calls it.
	AllowKcmp bool
}

// Report says what Install put in place, for the log.
type Report struct {
	// Arch is the architecture whose calls the filter knows (others kill the process).
	Arch string
	// PID is the process the signal and scheduling calls may still name.
	PID int
	// Denied names the calls refused whatever their arguments.
	Denied []string
	// Restricted names the calls allowed only with some arguments.
	Restricted []string
	// Instructions is the length of the BPF program.
	Instructions int
	// Checked names the calls tried right after the install, each refused with EPERM.
	Checked []string
}
