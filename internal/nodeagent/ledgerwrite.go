package nodeagent

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"

	"github.com/numapref/numapref/internal/fsutil"
)

// Writing the ledger: a record appended to the journal (journal.go) per write, and a
// compaction, the whole ledger in a new snapshot and an empty journal, at start, when the
// journal grows past the snapshot's size (at the end of a full pass, never on the fork
// path), and when an append would take the two files past the ledger's bound.

// journalCompactMin is the size past which a full pass compacts the journal, unless the
// snapshot is larger: compacting then costs no more than the appends it folds in.
const journalCompactMin = 256 << 10

// ledgerJournal is the engine's open journal and what the files on disk say.
type ledgerJournal struct {
	// f is the journal, open for appending; nil when the next write must compact (none
	// yet, or the last write or compaction failed: a half-written record may be in it).
	f *os.File
	// snap and file are the snapshot and the journal as the last compaction left them: a
	// write checks that they are still the files there (not replaced, by a link say).
	snap, file fs.FileInfo
	// size and snapSize are the sizes of the journal and the snapshot, in bytes.
	size, snapSize int
	// disk is the ledger the snapshot and the journal hold together, a copy: the
	// engine's own entries change in place.
	disk ledger
	// touched are the containers whose entries may have changed since the last write.
	touched map[ContainerKey]bool
}

// touch notes that the ledger entry of key may change: the next write compares it with
// what is on disk. Every change of e.ledger after start must be touched.
func (e *Engine) touch(key ContainerKey) {
	if e.journal.touched == nil {
		e.journal.touched = map[ContainerKey]bool{}
	}
	e.journal.touched[key] = true
}

// saveLedger writes what changed in the engine's ledger since its last write, if it has
// a file: one record appended to the journal and fsync'd.
func (e *Engine) saveLedger() error {
	if e.cfg.LedgerPath == "" {
		return nil
	}
	j := &e.journal
	if j.f == nil || !j.intact(e.cfg.LedgerPath) {
		return e.compactLedger()
	}
	rec := j.changes(e.ledger)
	if len(rec.Changes) == 0 {
		clear(j.touched)
		return nil
	}
	frame, err := encodeFrame(rec)
	if err != nil {
		return err
	}
	if j.snapSize+j.size+len(frame) > e.cfg.ledgerLimit {
		return e.compactLedger() // the exact size, and the bound, are the snapshot's
	}
	if err := e.appendFrame(frame); err != nil {
		j.close()
		return fmt.Errorf("writing ledger journal %s: %w", journalPath(e.cfg.LedgerPath), err)
	}
	for i := range rec.Changes {
		j.disk.apply(&rec.Changes[i])
	}
	clear(j.touched)
	return nil
}

// changes is the record of what changed in the touched entries of l since the journal
// last wrote them, in a stable order.
func (j *ledgerJournal) changes(l ledger) journalRecord {
	keys := make([]ContainerKey, 0, len(j.touched))
	for k := range j.touched {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b ContainerKey) int {
		return cmp.Or(cmp.Compare(a.PodUID, b.PodUID), cmp.Compare(a.Container, b.Container))
	})
	var rec journalRecord
	for _, k := range keys {
		if c := diffEntries(k, l[k], j.disk[k]); c != nil {
			rec.Changes = append(rec.Changes, *c)
		}
	}
	return rec
}

// appendFrame appends frame to the journal and fsyncs it: the write ahead of a SET.
func (e *Engine) appendFrame(frame []byte) error {
	j := &e.journal
	e.journalStep("append", frame)
	if _, err := j.f.Write(frame); err != nil {
		return err
	}
	e.journalStep("sync", frame)
	if err := j.f.Sync(); err != nil {
		return err
	}
	j.size += len(frame)
	return nil
}

// journalStep runs the crash test's hook at a step of a ledger write.
func (e *Engine) journalStep(step string, frame []byte) {
	if e.cfg.hooks.journalStep != nil {
		e.cfg.hooks.journalStep(step, e.journal.f, frame)
	}
}

// intact says whether the snapshot and the journal on disk are still the files the
// journal's last compaction left (a link or another file put in their place is not, even
// one given the same inode number): the snapshot unchanged since, the journal regular and
// of the size this engine wrote.
func (j *ledgerJournal) intact(ledgerPath string) bool {
	snap, err := os.Lstat(ledgerPath)
	if err != nil || !snap.Mode().IsRegular() || !os.SameFile(snap, j.snap) ||
		snap.Size() != j.snap.Size() || !snap.ModTime().Equal(j.snap.ModTime()) {
		return false
	}
	file, err := os.Lstat(journalPath(ledgerPath))
	return err == nil && file.Mode().IsRegular() && os.SameFile(file, j.file) && file.Size() == int64(j.size)
}

func (j *ledgerJournal) close() {
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
}

// compactLedger writes the whole ledger in a new snapshot, then an empty journal that
// continues it (its header names the snapshot's new generation). A crash between the two
// renames leaves the new snapshot beside the old journal, whose generation tells it stale.
// The ledger is refused past its bound (errLedgerFull).
func (e *Engine) compactLedger() error {
	j := &e.journal
	j.close()
	gen := rand.Uint64() | 1 // never 0, which means no journal
	f := ledgerFile{BootID: e.bootID, Journal: gen, Containers: e.ledger.sorted()}
	data, err := encodeLedgerFile(f)
	if err != nil {
		return err
	}
	header, err := encodeFrame(journalRecord{Gen: gen})
	if err != nil {
		return err
	}
	if len(data)+len(header) > e.cfg.ledgerLimit { // the bound is of both files
		return fmt.Errorf("writing ledger %s: %d bytes for %d containers, refused: %w of %d bytes",
			e.cfg.LedgerPath, len(data)+len(header), len(f.Containers), errLedgerFull, e.cfg.ledgerLimit)
	}
	if err := fsutil.WriteFileAtomic(e.cfg.LedgerPath, data, 0o600); err != nil {
		return fmt.Errorf("writing ledger: %w", err)
	}
	e.journalStep("snapshot", nil)
	path := journalPath(e.cfg.LedgerPath)
	if err := fsutil.WriteFileAtomic(path, header, 0o600); err != nil {
		return fmt.Errorf("writing ledger journal: %w", err)
	}
	if err := j.open(e.cfg.LedgerPath); err != nil {
		return err
	}
	j.snapSize = len(data)
	j.disk = e.ledger.clone()
	clear(j.touched)
	return nil
}

// open opens the journal beside the ledger at ledgerPath for appending, and notes which
// files the two are.
func (j *ledgerJournal) open(ledgerPath string) error {
	path := journalPath(ledgerPath)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("opening ledger journal: %w", err)
	}
	file, err := f.Stat()
	if err == nil {
		j.snap, err = os.Lstat(ledgerPath)
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("opening ledger journal: %w", err)
	}
	j.f, j.file, j.size = f, file, int(file.Size())
	if !j.intact(ledgerPath) { // replaced while it was opened
		j.close()
		return fmt.Errorf("opening ledger journal %s: replaced while it was opened", path)
	}
	return nil
}

// compactAtStart compacts the ledger read at start, if there are files: an upgraded
// agent's older ledger then takes this version's form, a torn or stale journal is gone,
// and the journal starts empty. With no file yet, the first write compacts.
func (e *Engine) compactAtStart() {
	for _, path := range []string{e.cfg.LedgerPath, journalPath(e.cfg.LedgerPath)} {
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := e.compactLedger(); err != nil {
			e.cfg.Log.Error(err, "Compacting the ledger at start; the next write tries again")
		}
		return
	}
}

// compactLedgerPastSize compacts the ledger at the end of a full pass when the journal
// has grown past the snapshot's size (and journalCompactMin).
func (e *Engine) compactLedgerPastSize() {
	j := &e.journal
	if e.cfg.LedgerPath == "" || j.f == nil || j.size <= max(e.cfg.journalCompactAt, j.snapSize) {
		return
	}
	if err := e.compactLedger(); err != nil {
		e.ledgerFailed(err)
	}
}
