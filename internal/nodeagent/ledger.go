package nodeagent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
)

// The ledger is the agent's memory of what it set, kept in a small file on the host so that
// an agent restarted after a crash or an upgrade can still undo its work. Entries are
// written before the kernel call they describe (write-ahead), and a pass whose write fails
// issues none of its SETs: after a crash the ledger may name a value the agent never set,
// which undo then finds absent and leaves alone; it never misses a value the agent did set.
//
// Task ids and start times name tasks of one boot only, so the file records the boot it
// was written in; a ledger from an earlier boot names no living task and is dropped.

// ledgerVersion is the format of ledgerFile. Version 1 had no boot id (it is read as a
// ledger of unknown boot). A new optional field that older agents may ignore keeps the
// version; a change an older agent would misread bumps it.
const ledgerVersion = 2

// stateFileLimit bounds each of the agent's state files (ledger, desired state, choices):
// for the ledger about 300,000 tasks. The agent refuses to grow the ledger further (the
// pass's SETs are then skipped, as for any failed write) rather than write ever larger
// files on every pass, and reads no larger file.
const stateFileLimit = 16 << 20

// defaultLedgerLimit is the ledger's bound unless a test sets another.
const defaultLedgerLimit = stateFileLimit

// errLedgerFull means the ledger would grow past its bound.
var errLedgerFull = errors.New("the ledger would grow past its bound")

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

// ledgerFile is the ledger on disk. To keep more in it, add a field here, fill it in
// saveLedger and take it in NewEngine; decodeLedgerFile cleans what it reads.
type ledgerFile struct {
	Version int `json:"version"`
	// BootID is the kernel's boot id when the file was written ("" if unknown).
	BootID     string            `json:"bootID,omitempty"`
	Containers []*containerEntry `json:"containers"`
}

// ledger maps containers to what the agent set in them.
type ledger map[ContainerKey]*containerEntry

// saveLedger writes the engine's ledger to its file, if it has one.
func (e *Engine) saveLedger() error {
	if e.cfg.LedgerPath == "" {
		return nil
	}
	f := ledgerFile{Version: ledgerVersion, BootID: e.bootID, Containers: e.ledger.sorted()}
	data, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encoding ledger: %w", err)
	}
	if len(data) > e.cfg.ledgerLimit {
		return fmt.Errorf("writing ledger %s: %d bytes for %d containers, refused: %w of %d bytes",
			e.cfg.LedgerPath, len(data), len(f.Containers), errLedgerFull, e.cfg.ledgerLimit)
	}
	if err := fsutil.WriteFileAtomic(e.cfg.LedgerPath, data, 0o600); err != nil {
		return fmt.Errorf("writing ledger: %w", err)
	}
	return nil
}

// loadLedger reads the ledger at path, of at most limit bytes. A missing file is an empty
// ledger. A file that cannot be read or parsed (damaged, too large, a link) yields an
// empty ledger and an error saying so: the agent starts anyway, and its next passes record
// again every task that has the value it wants.
func loadLedger(path string, limit int) (ledgerFile, error) {
	empty := ledgerFile{Version: ledgerVersion}
	data, err := fsutil.ReadStateFile(path, int64(limit))
	if errors.Is(err, fs.ErrNotExist) {
		return empty, nil
	}
	if err != nil {
		return empty, fmt.Errorf("ledger unreadable, starting from an empty one: %w", err)
	}
	f, err := decodeLedgerFile(data)
	if err != nil {
		return empty, fmt.Errorf("ledger %s is damaged, starting from an empty one: %w", path, err)
	}
	return f, nil
}

// decodeLedgerFile parses a ledger file and drops entries that name no container or task.
func decodeLedgerFile(data []byte) (ledgerFile, error) {
	var f ledgerFile
	if err := json.Unmarshal(data, &f); err != nil {
		return ledgerFile{Version: ledgerVersion}, err
	}
	if f.Version != 1 && f.Version != ledgerVersion {
		return ledgerFile{Version: ledgerVersion}, fmt.Errorf("version %d, want %d", f.Version, ledgerVersion)
	}
	kept := f.Containers[:0]
	seen := map[ContainerKey]bool{}
	for _, c := range f.Containers {
		if c == nil || c.PodUID == "" || c.Container == "" || seen[c.key()] {
			continue
		}
		seen[c.key()] = true
		for tid, t := range c.Tasks {
			if t == nil || tid <= 0 {
				delete(c.Tasks, tid)
			}
		}
		if c.Tasks == nil {
			c.Tasks = map[int]*taskEntry{}
		}
		kept = append(kept, c)
	}
	f.Version, f.Containers = ledgerVersion, kept
	return f, nil
}

func (c *containerEntry) key() ContainerKey {
	return ContainerKey{PodUID: types.UID(c.PodUID), Container: c.Container}
}

// ledger returns the file's containers by key.
func (f ledgerFile) ledger() ledger {
	l := make(ledger, len(f.Containers))
	for _, c := range f.Containers {
		l[c.key()] = c
	}
	return l
}

// sorted returns the entries in a stable order, for the file.
func (l ledger) sorted() []*containerEntry {
	out := make([]*containerEntry, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.PodUID < b.PodUID || a.PodUID == b.PodUID && a.Container < b.Container
	})
	return out
}

// loadState reads the ledger, first removing what writes killed mid-way left beside the
// state files. A ledger of another boot names no living task: it is dropped, and nothing
// is undone from it.
func (e *Engine) loadState() error {
	e.ledger = ledger{}
	for _, path := range []string{e.cfg.LedgerPath, e.cfg.ChoicesPath} {
		if path == "" {
			continue
		}
		if n, err := fsutil.RemoveStaleTemps(path); err != nil {
			e.cfg.Log.Error(err, "Removing stale temporary files", "file", path)
		} else if n > 0 {
			e.cfg.Log.Info("Removed temporary files a killed write left", "file", path, "files", n)
		}
	}
	if e.cfg.LedgerPath == "" {
		return nil
	}
	f, err := loadLedger(e.cfg.LedgerPath, e.cfg.ledgerLimit)
	if f.BootID != "" && e.bootID != "" && f.BootID != e.bootID {
		e.cfg.Log.Info("The ledger was written before the host rebooted: its tasks are gone, dropping it",
			"ledgerBootID", f.BootID, "bootID", e.bootID, "containers", len(f.Containers))
		e.ledgerDirty = true
		return err
	}
	e.ledger = f.ledger()
	return err
}
