package main

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/numapref/numapref/internal/sandbox"
)

// sandboxAgent installs the agent's seccomp filter (internal/sandbox) once everything that
// needs a denied call is open: the emulated kernel mounts its private tracefs and probes
// other processes when it starts, and keeps kcmp, which it calls for each new process.
// The filter cannot be removed: a failure stops the agent, unless -seccomp=false.
func sandboxAgent(f *agentFlags) error {
	log := ctrl.Log.WithName("agent")
	if !f.seccomp {
		log.Info("Seccomp filter not installed (-seccomp=false): nothing but the pod's own profile refuses ptrace or signals to other processes")
		return nil
	}
	rep, err := sandbox.Install(sandbox.Options{AllowKcmp: f.kernel == "emulated"})
	if err != nil {
		return fmt.Errorf("agent: %w (-seccomp=false starts without the filter)", err)
	}
	log.Info("Seccomp filter installed: these calls now fail with EPERM", "arch", rep.Arch, "pid", rep.PID,
		"denied", rep.Denied, "restricted", rep.Restricted, "instructions", rep.Instructions, "checkedFromInside", rep.Checked)
	return nil
}
