package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/numapref/numapref/controllers"
	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/nodeagent"
	"github.com/numapref/numapref/internal/statedir"
)

// lockWaitReport is how often an agent waiting for its state dir says so again.
const lockWaitReport = 30 * time.Second

// holdStateDir creates the state dir and takes its lock, waiting while another agent holds
// it (statedir.Dir.Hold): two agents on one dir would overwrite each other's ledger, and
// what the first one set would never be undone (a rolling update with a surge, two
// releases, kustomize beside the chart). While it waits the agent runs no pass, and answers
// its health probes: a surge update deletes the old pod only once the new one is ready,
// and the old pod's exit releases the lock (the kernel releases a flock when its holder
// dies, SIGKILL too).
func holdStateDir(ctx context.Context, f *agentFlags) (*fsutil.Lock, error) {
	dir := statedir.New(f.stateDir)
	log := ctrl.Log.WithName("agent").WithValues("stateDir", dir.Path())
	var stop func()
	waiting := func(holder int, waited time.Duration) {
		if stop == nil {
			stop = serveProbes(f.probeAddr)
		}
		log.Info("Waiting for the state dir: another agent holds it; no pass runs until it exits",
			"holderPID", holder, "waited", waited.Round(time.Second).String())
	}
	lock, err := dir.Hold(ctx, fsutil.WaitOptions{Report: lockWaitReport, Waiting: waiting})
	if stop != nil {
		stop()
	}
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	log.Info("Holding the state dir", "lock", dir.Lock())
	return lock, nil
}

// serveProbes answers the health probes on addr until the returned func is called.
func serveProbes(addr string) (stop func()) {
	if addr == "" || addr == "0" {
		return func() {}
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux := http.NewServeMux()
	mux.Handle("/healthz", ok)
	mux.Handle("/readyz", ok)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			ctrl.Log.WithName("agent").Error(err, "Serving health probes while waiting for the state dir")
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			ctrl.Log.WithName("agent").Error(err, "Stopping the health probes served while waiting for the state dir")
		}
		<-done
	}
}

// setupDrain has the agent undo everything and remove its state when its DaemonSet is
// deleted (controllers.SetupDrain). Without its pod's name it never drains.
func setupDrain(mgr ctrl.Manager, f *agentFlags, engine *nodeagent.Engine) error {
	log := ctrl.Log.WithName("agent")
	if f.podName == "" || f.podNamespace == "" {
		log.Info("No -pod-name or -pod-namespace (POD_NAME, POD_NAMESPACE): uninstalling numapref will not undo what this agent set")
		return nil
	}
	return controllers.SetupDrain(mgr, engine, controllers.DrainOptions{
		Pod:     types.NamespacedName{Namespace: f.podNamespace, Name: f.podName},
		Drained: func() { removeState(f.stateDir) },
	})
}

// removeState removes the agent's state dir once a drain left nothing to undo
// (statedir.Dir.Remove). The lock stays held on the removed file: this agent writes
// nothing more, and an agent that starts meanwhile locks a new file.
func removeState(dir string) {
	log := ctrl.Log.WithName("agent").WithValues("stateDir", dir)
	if err := statedir.New(dir).Remove(); err != nil {
		log.Error(err, "Removing the state dir after the drain")
		return
	}
	log.Info("Removed the state dir")
}

// adoptState moves the state files of an earlier version's state dir from into stateDir,
// under stateDir's lock, when stateDir has no ledger yet: an upgrade from a release whose
// agents kept their state in the shared /var/lib/numapref then still undoes what they set.
// The first agent to hold its lock takes them; "" adopts nothing. While an agent still runs
// on from, it refuses (statedir.Dir.Adopt): the agent exits, and its restart adopts once
// that agent is gone.
func adoptState(from, stateDir string) error {
	adopted, err := statedir.New(stateDir).Adopt(statedir.New(from))
	for _, name := range adopted {
		ctrl.Log.WithName("agent").Info("Adopted an earlier version's state file", "file", name, "from", from)
	}
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return nil
}
