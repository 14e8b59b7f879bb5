package nodeagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/numa"
)

// The ledger is the agent's memory of what it set, kept in a small file on the host so that
// an agent restarted after a crash, an upgrade or a node reboot can still undo its work.
// Entries are written before the kernel call they describe (write-ahead): after a crash the
// ledger may name a value the agent never set, which undo then finds absent and leaves alone;
// it never misses a value the agent did set.

const ledgerVersion = 1

// taskEntry is one task the agent gave a preferred node.
type taskEntry struct {
	Start uint64 `json:"start"`
	// Prev is the value the task had before; undo restores it (normally -1).
	Prev int `json:"prev"`
	// Values are the nodes the agent may have left in the kernel for this task: the one it
	// set, plus, while a change is in flight, the one it is about to set. Undo acts only
	// when the task's value is one of these, so a value the application chose is left alone.
	Values []int `json:"values"`
}

// task is the identity the entry records for task id tid.
func (t *taskEntry) task(tid int) numa.Task { return numa.Task{TID: tid, StartTime: t.Start} }

// containerEntry is one container the agent acted on.
type containerEntry struct {
	// PodUID and Container are the key (the API's pod UID).
	PodUID    string `json:"podUID"`
	Container string `json:"container"`
	// Ref locates its cgroup (for a static pod, with the kubelet's pod UID).
	Ref   cgroups.ContainerRef `json:"ref"`
	Tasks map[int]*taskEntry   `json:"tasks"`
}

func (c *containerEntry) ref() cgroups.ContainerRef { return c.Ref }

type ledgerFile struct {
	Version    int               `json:"version"`
	Containers []*containerEntry `json:"containers"`
}

// ledger maps containers to what the agent set in them.
type ledger map[ContainerKey]*containerEntry

// saveLedger writes the engine's ledger to its file, if it has one. A failed write is
// logged: the ledger in memory stays right, and the next pass that changes it writes again.
func (e *Engine) saveLedger() {
	if e.cfg.LedgerPath == "" {
		return
	}
	if err := e.ledger.save(e.cfg.LedgerPath); err != nil {
		e.cfg.Log.Error(err, "Saving ledger")
	}
}

// loadLedger reads the ledger at path. A missing file is an empty ledger. A file that cannot
// be parsed yields an empty ledger and an error saying so: the agent starts anyway, and its
// next passes record again every task that has the value it wants.
func loadLedger(path string) (ledger, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ledger{}, nil
	}
	if err != nil {
		return ledger{}, fmt.Errorf("reading ledger %s: %w", path, err)
	}
	l, err := decodeLedger(data)
	if err != nil {
		return l, fmt.Errorf("ledger %s is damaged, starting from an empty one: %w", path, err)
	}
	return l, nil
}

// decodeLedger parses a ledger file; on error it returns an empty ledger.
func decodeLedger(data []byte) (ledger, error) {
	l := ledger{}
	var f ledgerFile
	if err := json.Unmarshal(data, &f); err != nil {
		return l, err
	}
	if f.Version != ledgerVersion {
		return l, fmt.Errorf("version %d, want %d", f.Version, ledgerVersion)
	}
	for _, c := range f.Containers {
		if c == nil || c.PodUID == "" || c.Container == "" {
			continue
		}
		for tid, t := range c.Tasks {
			if t == nil || tid <= 0 {
				delete(c.Tasks, tid)
			}
		}
		if c.Tasks == nil {
			c.Tasks = map[int]*taskEntry{}
		}
		l[ContainerKey{PodUID: types.UID(c.PodUID), Container: c.Container}] = c
	}
	return l, nil
}

// save writes the ledger atomically.
func (l ledger) save(path string) error {
	data, err := l.encode()
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, data, 0o600)
}

func (l ledger) encode() ([]byte, error) {
	f := ledgerFile{Version: ledgerVersion}
	for _, c := range l {
		f.Containers = append(f.Containers, c)
	}
	sort.Slice(f.Containers, func(i, j int) bool {
		a, b := f.Containers[i], f.Containers[j]
		return a.PodUID < b.PodUID || a.PodUID == b.PodUID && a.Container < b.Container
	})
	data, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encoding ledger: %w", err)
	}
	return data, nil
}
