// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package ledger

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/known"
)

// ledgerVersion is the format of the file. Version 1 had no boot id (it is read as a
// ledger of unknown boot); versions 1 and 2 are a flat ledgerFile without a checksum, and
// are still read. Version 3 wraps the content in a ledgerEnvelope with its SHA-256, so a
// damaged file is told from a valid one. Version 4 is a snapshot continued by a journal
// (journal.go): an agent that read it as version 3 would miss what the journal holds, so
// it refuses it instead. A new optional field that older agents may ignore keeps the
// version; a change an older agent would misread bumps it.
const ledgerVersion = 4

// ErrDamaged means the ledger file could not be used: unreadable, past its bound,
// unparsable, of an unknown version or failing its checksum. What it recorded is lost:
// values the agent set before may never be undone. The agent goes on with an empty ledger
// and reports it (the numapref_ledger_damaged metric, a LedgerDamaged Event on the Node,
// the node's report).
var ErrDamaged = errors.New("the ledger is damaged")

// DefaultLimit is the ledger's bound unless Options say another: about 300,000 tasks. The
// store refuses to grow the ledger further (the pass's SETs are then skipped, as for any
// failed write) rather than write ever larger files on every pass, and reads no larger
// file.
const DefaultLimit = 16 << 20

// TaskCapacity is about how many task entries a ledger of limit bytes holds (about 56
// bytes each, as JSON).
func TaskCapacity(limit int) int { return limit / 56 }

// errFull means the ledger would grow past its bound.
var errFull = errors.New("the ledger would grow past its bound")

// ledgerFile is the ledger's content, and the whole file up to version 2. To keep more in
// it, add a field here, fill it in compact and take it in Open; decodeLedgerFile cleans
// what it reads.
type ledgerFile struct {
	// Version is left out of the envelope's content (the envelope carries it).
	Version int `json:"version,omitempty"`
	// BootID is the kernel's boot id when the file was written ("" if unknown).
	BootID string `json:"bootID,omitempty"`
	// Journal is the generation of the journal that continues this snapshot (0: none,
	// as in every file before version 4).
	Journal    uint64             `json:"journal,omitempty"`
	Containers []*known.Container `json:"containers"`
}

// ledgerEnvelope is the file from version 3: the content as written, and its checksum.
type ledgerEnvelope struct {
	Version int `json:"version"`
	// SHA256 is the hex SHA-256 of Ledger's bytes exactly as they are in the file.
	SHA256 string          `json:"sha256"`
	Ledger json.RawMessage `json:"ledger"`
}

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

// Read reads the ledger at path, of at most limit bytes (0: DefaultLimit), and its
// journal, as a restarted agent would but changing nothing on disk and whatever boot it is
// of. A missing file is an empty ledger. A file that cannot be read or used (a link, too
// large, unparsable, a bad checksum) yields an empty ledger and an error wrapping
// ErrDamaged; a damaged journal is ErrDamaged too, with what the snapshot and the
// journal's records before the damage say.
func Read(path string, limit int) (known.Containers, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	f, _, err := loadLedger(path, limit)
	return f.containers(), err
}

// loadLedger reads the ledger at path, of at most limit bytes, and its journal (Read),
// saying what it found in the journal.
func loadLedger(path string, limit int) (ledgerFile, journalNote, error) {
	f, err := loadSnapshot(path, limit)
	if err != nil {
		return f, journalNote{}, err
	}
	return readJournal(path, limit, f)
}

// journalNote is what readJournal found in the journal, for the log.
type journalNote struct {
	records int  // changes applied
	torn    int  // bytes of a torn last record, dropped
	stale   bool // of another generation than the snapshot: ignored
}

// readJournal applies to f, the snapshot read at path, the journal that continues it.
func readJournal(path string, limit int, f ledgerFile) (ledgerFile, journalNote, error) {
	if f.Journal == 0 {
		return f, journalNote{}, nil
	}
	data, err := fsutil.ReadStateFile(journalPath(path), int64(limit))
	if errors.Is(err, fs.ErrNotExist) {
		return f, journalNote{}, nil // a compaction killed before its journal: the snapshot holds all
	}
	if err != nil {
		return f, journalNote{}, fmt.Errorf("%w: its journal is unreadable, only the snapshot %s is read: %w", ErrDamaged, path, err)
	}
	recs, torn, perr := parseJournal(data)
	l := f.containers()
	stale, rerr := replayJournal(l, f.Journal, recs)
	f.Containers = l.Sorted()
	note := journalNote{records: max(0, len(recs)-1), torn: torn, stale: stale}
	if err := errors.Join(perr, rerr); err != nil && !stale {
		return f, note, fmt.Errorf("%w: %s, keeping what the snapshot and the records before the damage say: %w",
			ErrDamaged, journalPath(path), err)
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
		return empty, fmt.Errorf("%w: unreadable, starting from an empty one: %w", ErrDamaged, err)
	}
	f, err := decodeLedgerFile(data)
	if err != nil {
		return empty, fmt.Errorf("%w: %s, starting from an empty one: %w", ErrDamaged, path, err)
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
func cleanEntries(containers []*known.Container) []*known.Container {
	kept := containers[:0]
	seen := map[desire.ContainerKey]bool{}
	for _, c := range containers {
		if c == nil || c.PodUID == "" || c.Container == "" || seen[c.Key()] {
			continue
		}
		seen[c.Key()] = true
		for tid, t := range c.Tasks {
			if t == nil || tid <= 0 {
				delete(c.Tasks, tid)
			}
		}
		if c.Tasks == nil {
			c.Tasks = map[int]*known.Task{}
		}
		kept = append(kept, c)
	}
	return kept
}

// containers returns the file's containers by key.
func (f ledgerFile) containers() known.Containers {
	l := make(known.Containers, len(f.Containers))
	for _, c := range f.Containers {
		l[c.Key()] = c
	}
	return l
}
