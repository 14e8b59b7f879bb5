package nodeagent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
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

// ledgerVersion is the format of the file. Version 1 had no boot id (it is read as a
// ledger of unknown boot); versions 1 and 2 are a flat ledgerFile without a checksum, and
// are still read. Version 3 wraps the content in a ledgerEnvelope with its SHA-256, so a
// damaged file is told from a valid one. Version 4 is a snapshot continued by a journal
// (journal.go): an agent that read it as version 3 would miss what the journal holds, so
// it refuses it instead. A new optional field that older agents may ignore keeps the
// version; a change an older agent would misread bumps it.
const ledgerVersion = 4

// ErrLedgerDamaged means the ledger file could not be used: unreadable, past its bound,
// unparsable, of an unknown version or failing its checksum. What it recorded is lost:
// values the agent set before may never be undone. The agent goes on with an empty ledger
// and reports it (the numapref_ledger_damaged metric, a LedgerDamaged Event on the Node,
// the node's report).
var ErrLedgerDamaged = errors.New("the ledger is damaged")

// stateFileLimit bounds each of the agent's state files (ledger, desired state, choices):
// for the ledger about 300,000 tasks. The agent refuses to grow the ledger further (the
// pass's SETs are then skipped, as for any failed write) rather than write ever larger
// files on every pass, and reads no larger file.
const stateFileLimit = 16 << 20

// ledgerTaskCapacity is about how many task entries a ledger of limit bytes holds (about
// 56 bytes each, as JSON).
func ledgerTaskCapacity(limit int) int { return limit / 56 }

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

// ledgerFile is the ledger's content, and the whole file up to version 2. To keep more in
// it, add a field here, fill it in compactLedger and take it in NewEngine; decodeLedgerFile
// cleans what it reads.
type ledgerFile struct {
	// Version is left out of the envelope's content (the envelope carries it).
	Version int `json:"version,omitempty"`
	// BootID is the kernel's boot id when the file was written ("" if unknown).
	BootID string `json:"bootID,omitempty"`
	// Journal is the generation of the journal that continues this snapshot (0: none,
	// as in every file before version 4).
	Journal    uint64            `json:"journal,omitempty"`
	Containers []*containerEntry `json:"containers"`
}

// ledgerEnvelope is the file from version 3: the content as written, and its checksum.
type ledgerEnvelope struct {
	Version int `json:"version"`
	// SHA256 is the hex SHA-256 of Ledger's bytes exactly as they are in the file.
	SHA256 string          `json:"sha256"`
	Ledger json.RawMessage `json:"ledger"`
}

// ledger maps containers to what the agent set in them.
type ledger map[ContainerKey]*containerEntry

// encodeLedgerFile is the file's form of f: its content in an envelope with its checksum.
func encodeLedgerFile(f ledgerFile) ([]byte, error) {
	f.Version = 0
	content, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encoding ledger: %w", err)
	}
	sum := sha256.Sum256(content)
	data, err := json.Marshal(ledgerEnvelope{Version: ledgerVersion, SHA256: hex.EncodeToString(sum[:]), Ledger: content})
	if err != nil {
		return nil, fmt.Errorf("encoding ledger: %w", err)
	}
	return data, nil
}

// loadLedger reads the ledger at path, of at most limit bytes, and its journal. A missing
// file is an empty ledger. A file that cannot be read or used (a link, too large,
// unparsable, a bad checksum) yields an empty ledger and an error wrapping
// ErrLedgerDamaged: the agent starts anyway, and its next passes record again every task
// that has the value it wants. A damaged journal is ErrLedgerDamaged too, with what the
// snapshot and the journal's records before the damage say.
func loadLedger(path string, limit int) (ledgerFile, error) {
	f, _, err := loadLedgerJournal(path, limit)
	return f, err
}

// journalNote is what loadLedgerJournal found in the journal, for the log.
type journalNote struct {
	records int  // changes applied
	torn    int  // bytes of a torn last record, dropped
	stale   bool // of another generation than the snapshot: ignored
}

// loadLedgerJournal is loadLedger, saying what it found in the journal.
func loadLedgerJournal(path string, limit int) (ledgerFile, journalNote, error) {
	f, err := loadSnapshot(path, limit)
	if err != nil || f.Journal == 0 {
		return f, journalNote{}, err
	}
	data, err := fsutil.ReadStateFile(journalPath(path), int64(limit))
	if errors.Is(err, fs.ErrNotExist) {
		return f, journalNote{}, nil // a compaction killed before its journal: the snapshot holds all
	}
	if err != nil {
		return f, journalNote{}, fmt.Errorf("%w: its journal is unreadable, only the snapshot %s is read: %w", ErrLedgerDamaged, path, err)
	}
	recs, torn, perr := parseJournal(data)
	l := f.ledger()
	stale, rerr := replayJournal(l, f.Journal, recs)
	f.Containers = l.sorted()
	note := journalNote{records: max(0, len(recs)-1), torn: torn, stale: stale}
	if err := errors.Join(perr, rerr); err != nil && !stale {
		return f, note, fmt.Errorf("%w: %s, keeping what the snapshot and the records before the damage say: %w",
			ErrLedgerDamaged, journalPath(path), err)
	}
	return f, note, nil
}

// loadSnapshot reads the ledger file at path, without its journal.
func loadSnapshot(path string, limit int) (ledgerFile, error) {
	empty := ledgerFile{Version: ledgerVersion}
	data, err := fsutil.ReadStateFile(path, int64(limit))
	if errors.Is(err, fs.ErrNotExist) {
		return empty, nil
	}
	if err != nil {
		return empty, fmt.Errorf("%w: unreadable, starting from an empty one: %w", ErrLedgerDamaged, err)
	}
	f, err := decodeLedgerFile(data)
	if err != nil {
		return empty, fmt.Errorf("%w: %s, starting from an empty one: %w", ErrLedgerDamaged, path, err)
	}
	return f, nil
}

// decodeLedgerFile parses a ledger file of any version this agent reads, checks the
// checksum of version 3, and drops entries that name no container or task.
func decodeLedgerFile(data []byte) (ledgerFile, error) {
	var env ledgerEnvelope
	if err := json.Unmarshal(data, &env); err != nil {
		return ledgerFile{Version: ledgerVersion}, err
	}
	content := data
	switch env.Version {
	case 1, 2: // flat, no checksum
	case 3, ledgerVersion:
		sum := sha256.Sum256(env.Ledger)
		if want, err := hex.DecodeString(env.SHA256); err != nil || !bytes.Equal(want, sum[:]) {
			return ledgerFile{Version: ledgerVersion}, fmt.Errorf("checksum mismatch: the file says %.16q, its content has %x", env.SHA256, sum[:8])
		}
		content = env.Ledger
	default:
		return ledgerFile{Version: ledgerVersion}, fmt.Errorf("version %d, want 1 to %d", env.Version, ledgerVersion)
	}
	var f ledgerFile
	if err := json.Unmarshal(content, &f); err != nil {
		return ledgerFile{Version: ledgerVersion}, err
	}
	if env.Version < ledgerVersion {
		f.Journal = 0 // no journal continues a file of an older version
	}
	f.Version, f.Containers = ledgerVersion, cleanEntries(f.Containers)
	return f, nil
}

// cleanEntries drops entries that name no container or task, and repeated containers.
func cleanEntries(containers []*containerEntry) []*containerEntry {
	kept := containers[:0]
	seen := map[ContainerKey]bool{}
	for _, c := range containers {
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
	return kept
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

// loadState reads the ledger and its journal, first removing what writes killed mid-way
// left beside the state files, and compacts them (ledgerwrite.go). A ledger of another
// boot names no living task: it is dropped, and nothing is undone from it.
func (e *Engine) loadState() error {
	e.ledger = ledger{}
	paths := []string{e.cfg.ChoicesPath}
	if e.cfg.LedgerPath != "" {
		paths = append(paths, e.cfg.LedgerPath, journalPath(e.cfg.LedgerPath))
	}
	for _, path := range paths {
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
	f, note, err := loadLedgerJournal(e.cfg.LedgerPath, e.cfg.ledgerLimit)
	if errors.Is(err, ErrLedgerDamaged) {
		e.cfg.Metrics.reportLedgerDamaged()
	}
	e.logJournal(note)
	if f.BootID != "" && e.bootID != "" && f.BootID != e.bootID {
		e.cfg.Log.Info("The ledger was written before the host rebooted: its tasks are gone, dropping it",
			"ledgerBootID", f.BootID, "bootID", e.bootID, "containers", len(f.Containers))
		e.ledgerDirty = true
	} else {
		e.ledger = f.ledger()
	}
	e.compactAtStart()
	return err
}

// logJournal says what the start found in the journal.
func (e *Engine) logJournal(note journalNote) {
	if note.torn > 0 {
		e.cfg.Log.Info("Dropped the ledger journal's torn last record: a write killed before its fsync, whose SETs were never issued",
			"bytes", note.torn)
	}
	if note.stale {
		e.cfg.Log.V(1).Info("Ignored a ledger journal its snapshot already holds (a compaction was killed between its renames)")
	}
	e.cfg.Log.V(2).Info("Read the ledger journal", "changes", note.records)
}
