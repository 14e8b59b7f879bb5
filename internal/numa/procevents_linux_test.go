//go:build linux && host

package numa

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/numapref/numapref/internal/testutil/testenv"
)

// TestOpenProcEvents subscribes to the real proc connector and watches a child process
// come and go. It needs CAP_NET_ADMIN.
func TestOpenProcEvents(t *testing.T) {
	pe, err := OpenProcEvents()
	testenv.RequireNoError(t, err, "the proc connector (CAP_NET_ADMIN, CONFIG_PROC_EVENTS)", "sudo make host")
	defer pe.Close()

	testenv.RequireFile(t, "/bin/true", "a system with /bin/true (coreutils)")
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("running /bin/true: %v", err)
	}
	child := cmd.Process.Pid
	seen := map[ProcEventKind]ProcEvent{}
	deadline := time.After(10 * time.Second)
	for len(seen) < 3 {
		select {
		case ev, ok := <-pe.Events():
			if !ok {
				t.Fatal("event stream closed")
			}
			if ev.ChildTID == child {
				seen[ev.Kind] = ev
			}
		case <-deadline:
			t.Fatalf("within 10s saw only %v for pid %d", seen, child)
		}
	}
	if fork := seen[ProcEventFork]; fork.ChildTGID != child || fork.ParentTGID != os.Getpid() {
		t.Errorf("fork event %+v, want child %d of this process %d", fork, child, os.Getpid())
	}
	if seen[ProcEventExec].ChildTGID != child || seen[ProcEventExit].ChildTGID != child {
		t.Errorf("exec %+v, exit %+v", seen[ProcEventExec], seen[ProcEventExit])
	}
	if err := pe.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	for range pe.Events() { // drains, then ends: the channel is closed
	}
}
