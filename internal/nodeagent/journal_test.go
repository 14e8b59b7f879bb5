package nodeagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
)

// testJournal is a journal of a header and four changes, and where each frame starts
// (ends[i] is where frame i ends).
func testJournal(t testing.TB) (data []byte, recs []journalRecord, ends []int) {
	t.Helper()
	ref := cgroups.ContainerRef{PodUID: "pod", ContainerID: "containerd://x"}
	recs = []journalRecord{
		{Gen: 7},
		{Changes: []containerChange{{PodUID: "pod", Container: "main", Ref: &ref,
			Put: map[int]*taskEntry{100: {Start: 1100, Prev: -1, Values: []int{1}}}}}},
		{Changes: []containerChange{{PodUID: "pod", Container: "main",
			Put: map[int]*taskEntry{101: {Start: 1101, Prev: -1, Values: []int{1, 0}}}}}},
		{Changes: []containerChange{{PodUID: "pod", Container: "main", Drop: []int{100}},
			{PodUID: "other", Container: "side", Ref: &ref, Put: map[int]*taskEntry{7: {Start: 70, Prev: 1, Values: []int{0}}}}}},
		{Changes: []containerChange{{PodUID: "other", Container: "side", Gone: true}}},
	}
	for _, r := range recs {
		frame, err := encodeFrame(r)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, frame...)
		ends = append(ends, len(data))
	}
	return data, recs, ends
}

// Every truncation of a journal, at every byte, reads as the records wholly before the
// cut, the rest dropped as a torn last record: never a damaged journal, never a wrong
// record.
func TestParseJournalEveryTruncation(t *testing.T) {
	data, recs, ends := testJournal(t)
	for cut := 0; cut <= len(data); cut++ {
		got, torn, err := parseJournal(data[:cut])
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		whole := 0
		for whole < len(ends) && ends[whole] <= cut {
			whole++
		}
		if diff := cmp.Diff(recs[:whole], got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("cut at %d: records (-want +got):\n%s", cut, diff)
		}
		wantTorn := cut
		if whole > 0 {
			wantTorn = cut - ends[whole-1]
		}
		if torn != wantTorn {
			t.Fatalf("cut at %d: %d torn bytes, want %d", cut, torn, wantTorn)
		}
	}
}

// Every change of one byte of a journal reads as a prefix of its records: a change in
// the last record drops it (torn), one in the checksum or payload of an earlier record is
// damage. A record is never misread.
func TestParseJournalEveryCorruption(t *testing.T) {
	data, recs, ends := testJournal(t)
	for at := range data {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			bad := bytes.Clone(data)
			bad[at] ^= mask
			got, _, err := parseJournal(bad)
			in, start := 0, 0
			for ends[in] <= at {
				start = ends[in]
				in++
			}
			if diff := cmp.Diff(recs[:len(got)], got, cmpopts.EquateEmpty()); diff != "" || len(got) > in {
				t.Fatalf("byte %d ^ %#x (record %d): records are not a prefix before it (-want +got):\n%s", at, mask, in, diff)
			}
			last := in == len(recs)-1
			switch {
			case last && (err != nil || len(got) != in):
				t.Fatalf("byte %d ^ %#x in the last record: %d records, %v; want it dropped as torn", at, mask, len(got), err)
			case !last && at >= start+4 && !errors.Is(err, errJournalDamaged):
				t.Fatalf("byte %d ^ %#x in record %d of %d: %v, want damage", at, mask, in, len(recs), err)
			}
		}
	}
}

// FuzzParseJournal: whatever the bytes, parsing never panics, and the records it returns
// are the payloads of frames whose checksums match, in order.
func FuzzParseJournal(f *testing.F) {
	data, _, ends := testJournal(f)
	f.Add(data)
	f.Add(data[:ends[2]+3])
	f.Add([]byte{})
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, torn, err := parseJournal(data)
		off := 0
		for i := range recs {
			payload, size, ok := nextFrame(data[off:])
			if !ok {
				t.Fatalf("record %d at byte %d has no valid frame", i, off)
			}
			var rec journalRecord
			if json.Unmarshal(payload, &rec) != nil || !cmp.Equal(rec, recs[i]) {
				t.Fatalf("record %d differs from its frame's payload", i)
			}
			off += size
		}
		if err == nil && off+torn != len(data) {
			t.Fatalf("%d bytes of records and %d torn, of %d", off, torn, len(data))
		}
	})
}

// The journal holds, after every pass, what the engine's ledger does: a restarted engine
// reads the same ledger. A pass appends to the journal and leaves the snapshot alone; a
// full pass compacts once the journal passes its size.
func TestLedgerJournalFollowsTheLedger(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	path := filepath.Join(t.TempDir(), "ledger.json")
	e := h.engine(EngineConfig{LedgerPath: path, journalCompactAt: 1 << 20})
	same := func(step string) {
		t.Helper()
		l, err := readLedger(path)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if diff := cmp.Diff(e.ledger, l); diff != "" {
			t.Fatalf("%s: the files say (-engine +files):\n%s", step, diff)
		}
	}
	e.SetDesired([]Desire{fakeDesire(1)})
	e.Pass()
	same("applied")
	snap := stat(t, path)
	journal := stat(t, journalPath(path))

	h.addTask(101, -1)
	h.addTask(102, 0)
	e.Pass()
	same("two tasks more")
	h.moveOut(100)
	e.Pass()
	same("a task gone")
	if !os.SameFile(snap, stat(t, path)) || stat(t, path).ModTime() != snap.ModTime() {
		t.Errorf("the snapshot was rewritten; passes must only append to the journal")
	}
	if grown := stat(t, journalPath(path)); !os.SameFile(journal, grown) || grown.Size() <= journal.Size() {
		t.Errorf("journal %d bytes, then %d: want appended to", journal.Size(), grown.Size())
	}

	e.SetDesired([]Desire{fakeDesire(0)}) // values in flight, written ahead, then settled
	e.Pass()
	same("moved to node 0")

	e.cfg.journalCompactAt = 1 // past its size: the next full pass compacts
	e.SetDesired([]Desire{fakeDesire(1)})
	e.Pass()
	same("compacted")
	if os.SameFile(snap, stat(t, path)) {
		t.Errorf("the snapshot was not rewritten by the compaction")
	}
	e.SetDesired(nil)
	e.Pass()
	same("undone")
	if len(e.ledger) != 0 {
		t.Errorf("ledger after undo: %v", e.ledger)
	}
}

func stat(t *testing.T, path string) os.FileInfo {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// writeV3Ledger writes testLedger as an agent before the journal did: a version 3 file.
func writeV3Ledger(t *testing.T, path string) {
	t.Helper()
	good, err := encodeLedgerFile(testLedger())
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, strings.Replace(string(good), `"version":4`, `"version":3`, 1))
}

// An agent upgraded in place reads the version 3 ledger its predecessor wrote, keeps it
// in this version's files, and undoes what the predecessor set.
func TestLedgerUpgradeFromVersion3(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, 1) // the predecessor set it: testLedger records it
	path := filepath.Join(t.TempDir(), "ledger.json")
	writeV3Ledger(t, path)
	e := h.engine(EngineConfig{LedgerPath: path})
	if diff := cmp.Diff(testLedger().ledger(), e.ledger); diff != "" {
		t.Fatalf("ledger read (-want +got):\n%s", diff)
	}
	f, err := loadSnapshot(path, defaultLedgerLimit)
	if err != nil || f.Journal == 0 || len(f.Containers) != 1 {
		t.Errorf("after start the snapshot is %+v, %v; want this version's, with a journal and the container", f, err)
	}
	again := h.engine(EngineConfig{LedgerPath: path}) // restarted again, before any pass
	again.SetDesired(nil)
	again.Pass()
	if v := h.value(100); v != -1 {
		t.Errorf("task 100 holds %d after undo, want -1: the upgraded agent lost its predecessor's value", v)
	}
}

// A torn last record of the journal (a write killed before its fsync) is dropped at
// start: no damage; a damaged record with a valid one after it is damage, and the engine
// keeps what the records before it say; a journal of another generation is ignored.
func TestEngineReadsTheJournal(t *testing.T) {
	for name, c := range map[string]struct {
		spoil   func(data []byte, ends []int) []byte
		damaged bool
		want    []int // tasks of the container the engine starts with
	}{
		"intact":             {spoil: func(d []byte, _ []int) []byte { return d }, want: []int{101}},
		"torn last record":   {spoil: func(d []byte, ends []int) []byte { return d[:ends[2]+5] }, want: []int{100, 101}},
		"garbage last":       {spoil: func(d []byte, _ []int) []byte { return append(d, 0x30, 0, 0, 0, 1, 2, 3, 4, '{') }, want: []int{101}},
		"a record damaged":   {spoil: func(d []byte, ends []int) []byte { d[ends[1]+12] ^= 1; return d }, damaged: true, want: []int{100}},
		"another generation": {spoil: func(d []byte, _ []int) []byte { d[frameHeader+7] ^= 1; return restamp(d) }, want: nil},
	} {
		t.Run(name, func(t *testing.T) {
			h := newFakeHost(t)
			path := filepath.Join(t.TempDir(), "ledger.json")
			data, _, ends := testJournal(t)
			snap, err := encodeLedgerFile(ledgerFile{Journal: 7})
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, path, string(snap))
			writeFile(t, journalPath(path), string(c.spoil(data[:ends[3]], ends)))
			m := NewMetrics()
			e, err := h.newEngine(EngineConfig{LedgerPath: path, Metrics: m})
			if errors.Is(err, ErrLedgerDamaged) != c.damaged {
				t.Errorf("NewEngine: %v, want damaged %v", err, c.damaged)
			}
			if got := testutil.ToFloat64(m.ledgerDamaged); (got == 1) != c.damaged {
				t.Errorf("numapref_ledger_damaged = %v", got)
			}
			var got []int
			if entry := e.ledger[fakeDesire(0).Key()]; entry != nil {
				for tid := range entry.Tasks {
					got = append(got, tid)
				}
			}
			if diff := cmp.Diff(c.want, got, cmpopts.SortSlices(func(a, b int) bool { return a < b })); diff != "" {
				t.Errorf("tasks (-want +got):\n%s", diff)
			}
			if l, err := readLedger(path); err != nil || !cmp.Equal(e.ledger, l) {
				t.Errorf("after start the files say %v, %v; want the engine's ledger (compacted)", l, err)
			}
		})
	}
}

// restamp recomputes the checksum of the first frame of data, after a change of its payload.
func restamp(data []byte) []byte {
	n := int(data[0]) | int(data[1])<<8
	sum := frameSum(data[:4], data[frameHeader:frameHeader+n])
	data[4], data[5], data[6], data[7] = byte(sum), byte(sum>>8), byte(sum>>16), byte(sum>>24)
	return data
}

// A snapshot replaced while the engine runs (here by a link) is not appended to: the next
// write compacts, which refuses the link, and the pass sets nothing.
func TestEngineNoticesAReplacedLedger(t *testing.T) {
	h := newFakeHost(t)
	h.addTask(100, -1)
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.json")
	e := h.engine(EngineConfig{LedgerPath: path})
	e.SetDesired([]Desire{fakeDesire(1)})
	e.Pass()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), path); err != nil {
		t.Fatal(err)
	}
	h.addTask(101, -1)
	e.Pass()
	if v := h.value(101); v != -1 {
		t.Errorf("task 101 holds %d: set though its ledger entry went to a journal no snapshot continues", v)
	}
}

// The snapshot and the journal together stay within the ledger's bound: an append that
// would pass it compacts instead, and a ledger that does not fit even compacted is refused
// (the pass sets nothing).
func TestLedgerJournalKeepsTheBound(t *testing.T) {
	h := newFakeHost(t)
	path := filepath.Join(t.TempDir(), "ledger.json")
	const limit = 1500
	e := h.engine(EngineConfig{LedgerPath: path, ledgerLimit: limit, journalCompactAt: 1 << 20})
	e.SetDesired([]Desire{fakeDesire(1)})
	compactions, refused := 0, false
	for tid := 100; tid < 130 && !refused; tid++ {
		snap, _ := os.Stat(path)
		h.addTask(tid, -1)
		e.Pass()
		if e.Results()[fakeDesire(1).Key()].Reason != numav1.ReasonApplied {
			refused = true
			if v := h.value(tid); v != -1 {
				t.Errorf("task %d holds %d though its ledger entry was refused", tid, v)
			}
			break
		}
		if st := stat(t, path); snap != nil && !os.SameFile(snap, st) {
			compactions++
		}
		if total := stat(t, path).Size() + stat(t, journalPath(path)).Size(); total > limit {
			t.Fatalf("task %d: the ledger's files hold %d bytes, past the bound of %d", tid, total, limit)
		}
		if l, err := readLedger(path); err != nil || !cmp.Equal(e.ledger, l) {
			t.Fatalf("task %d: the files say %v, %v; want the engine's ledger", tid, l, err)
		}
	}
	if compactions == 0 || !refused {
		t.Errorf("%d compactions, refused %v: want the bound to compact, then refuse", compactions, refused)
	}
}
