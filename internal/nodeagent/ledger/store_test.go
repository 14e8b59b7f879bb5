// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package ledger

import (
	"errors"
	"fmt"
	"github.com/numapref/numapref/internal/testutil/files"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/types"

	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/known"
)

// testKey is the container of testLedger.
var testKey = desire.ContainerKey{PodUID: "pod", Container: "main"}

// testRef is testKey's reference.
var testRef = cgroups.ContainerRef{PodUID: "pod", ContainerID: "containerd://x"}

// task is the entry of a task the agent set to node, started at 1000+tid.
func task(tid, node int) *known.Task {
	return &known.Task{Start: uint64(1000 + tid), Prev: -1, Values: []int{node}}
}

// open opens a store at path, failing the test on any error.
func open(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// sameOnDisk checks that the files at path read as the store's ledger.
func sameOnDisk(t *testing.T, s *Store, path, step string) {
	t.Helper()
	l, err := Read(path, 0)
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	if diff := cmp.Diff(s.View().Clone(), l, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("%s: the files say (-store +files):\n%s", step, diff)
	}
}

// The files hold, after every write, what the store's ledger does: a restarted agent reads
// the same. A write appends to the journal and leaves the snapshot alone; CompactPastSize
// compacts once the journal passes its size.
func TestStoreJournalFollowsTheLedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.json")
	s := open(t, path, Options{CompactAt: 1 << 20})
	write := func(step string) {
		t.Helper()
		if err := s.Write(); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if s.Dirty() {
			t.Fatalf("%s: dirty after a write", step)
		}
		sameOnDisk(t, s, path, step)
	}
	s.Record(testKey, known.Change{Ref: testRef, Put: map[int]*known.Task{100: task(100, 1)}})
	write("a task recorded")
	snap, journal := files.Stat(t, path), files.Stat(t, journalPath(path))

	s.Record(testKey, known.Change{Ref: testRef, Put: map[int]*known.Task{101: task(101, 1), 102: task(102, 1)}})
	write("two tasks more")
	s.Record(testKey, known.Change{Ref: testRef, Forget: []int{100}})
	write("a task forgotten")
	if !os.SameFile(snap, files.Stat(t, path)) || files.Stat(t, path).ModTime() != snap.ModTime() {
		t.Errorf("the snapshot was rewritten; writes must only append to the journal")
	}
	if grown := files.Stat(t, journalPath(path)); !os.SameFile(journal, grown) || grown.Size() <= journal.Size() {
		t.Errorf("journal %d bytes, then %d: want appended to", journal.Size(), grown.Size())
	}
	if err := s.CompactPastSize(); err != nil || !os.SameFile(snap, files.Stat(t, path)) {
		t.Errorf("CompactPastSize below its size: %v, or the snapshot was rewritten", err)
	}

	for files.Stat(t, journalPath(path)).Size() <= files.Stat(t, path).Size() { // values in flight, then settled
		s.Record(testKey, known.Change{Ref: testRef, Put: map[int]*known.Task{101: {Start: 1101, Prev: -1, Values: []int{1, 0}}}})
		write("a value in flight")
		s.Confirm(testKey, 101, 0)
		write("a value settled")
	}
	s.opts.CompactAt = 1 // the journal past the snapshot's size: compacted
	if err := s.CompactPastSize(); err != nil {
		t.Fatal(err)
	}
	sameOnDisk(t, s, path, "compacted")
	if os.SameFile(snap, files.Stat(t, path)) {
		t.Errorf("the snapshot was not rewritten by the compaction")
	}
	s.Forget(testKey)
	write("forgotten")
	if s.Len() != 0 {
		t.Errorf("ledger after Forget: %v", s.View().Clone())
	}
}

// Every method that changes the ledger notes what it changes: the next write takes the
// change to disk, whatever it is.
func TestStoreWritesEveryChange(t *testing.T) {
	for name, change := range map[string]func(s *Store){
		"Record": func(s *Store) {
			s.Record(testKey, known.Change{Ref: testRef, Put: map[int]*known.Task{102: task(102, 0)}})
		},
		"Forget":    func(s *Store) { s.Forget(testKey) },
		"DropTask":  func(s *Store) { s.DropTask(testKey, 100) },
		"TakeValue": func(s *Store) { s.TakeValue(testKey, 101, 0) },
		"Confirm":   func(s *Store) { s.Confirm(testKey, 101, 0) },
		"KeepTasks": func(s *Store) { s.KeepTasks(testKey, map[int]*known.Task{100: task(100, 1)}) },
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.json")
			s := open(t, path, Options{})
			in := task(101, 1)
			in.Values = []int{1, 0} // a change in flight
			s.Record(testKey, known.Change{Ref: testRef, Put: map[int]*known.Task{100: task(100, 1), 101: in}})
			if err := s.Write(); err != nil {
				t.Fatal(err)
			}
			before := s.View().Clone()
			change(s)
			if !s.Dirty() {
				t.Errorf("not dirty after %s", name)
			}
			if cmp.Equal(before, s.View().Clone()) {
				t.Fatalf("%s changed nothing: the test proves nothing", name)
			}
			if err := s.Write(); err != nil {
				t.Fatal(err)
			}
			sameOnDisk(t, s, path, name)
		})
	}
}

// What a store is given and what its view returns are copies: changing them changes
// nothing in the store.
func TestStoreSharesNothing(t *testing.T) {
	s := open(t, "", Options{})
	put := map[int]*known.Task{100: task(100, 1)}
	s.Record(testKey, known.Change{Ref: testRef, Put: put})
	put[100].Values[0] = 7
	got, _ := s.View().Entry(testKey).Task(100)
	got.Values[0] = 8
	if again, _ := s.View().Entry(testKey).Task(100); !slices.Equal(again.Values, []int{1}) {
		t.Errorf("task 100 holds %v in the store, want [1]", again.Values)
	}
}

// Record says when an entry's container runs again under another container ID, and not
// when the runtime's ID names it without the API's scheme.
func TestRecordSaysTheContainerRunsAgain(t *testing.T) {
	s := open(t, "", Options{})
	if s.Record(testKey, known.Change{Ref: testRef}) {
		t.Error("a new entry runs again")
	}
	bare := testRef
	bare.ContainerID = "x"
	if s.Record(testKey, known.Change{Ref: bare}) {
		t.Error("the same container without its scheme runs again")
	}
	again := testRef
	again.ContainerID = "containerd://y"
	if !s.Record(testKey, known.Change{Ref: again}) {
		t.Error("a new container ID does not run again")
	}
}

// A torn last record of the journal (a write killed before its fsync) is dropped at
// start: no damage; a damaged record with a valid one after it is damage, and the store
// keeps what the records before it say; a journal of another generation is ignored.
// Whatever Open found, the files then say what the store holds (compacted).
func TestOpenReadsTheJournal(t *testing.T) {
	for name, c := range map[string]struct {
		spoil   func(data []byte, ends []int) []byte
		damaged bool
		want    []int // tasks of the container the store starts with
	}{
		"intact":             {spoil: func(d []byte, _ []int) []byte { return d }, want: []int{101}},
		"torn last record":   {spoil: func(d []byte, ends []int) []byte { return d[:ends[2]+5] }, want: []int{100, 101}},
		"garbage last":       {spoil: func(d []byte, _ []int) []byte { return append(d, 0x30, 0, 0, 0, 1, 2, 3, 4, '{') }, want: []int{101}},
		"a record damaged":   {spoil: func(d []byte, ends []int) []byte { d[ends[1]+12] ^= 1; return d }, damaged: true, want: []int{100}},
		"another generation": {spoil: func(d []byte, _ []int) []byte { d[frameHeader+7] ^= 1; return restamp(d) }, want: nil},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.json")
			data, _, ends := testJournal(t)
			snap, err := encodeLedgerFile(ledgerFile{Journal: 7})
			if err != nil {
				t.Fatal(err)
			}
			files.Write(t, path, string(snap))
			files.Write(t, journalPath(path), string(c.spoil(data[:ends[3]], ends)))
			s, err := Open(path, Options{})
			if errors.Is(err, ErrDamaged) != c.damaged {
				t.Errorf("Open: %v, want damaged %v", err, c.damaged)
			}
			got := slices.Collect(s.View().Entry(testKey).TIDs())
			if diff := cmp.Diff(c.want, got, cmpopts.SortSlices(func(a, b int) bool { return a < b })); diff != "" {
				t.Errorf("tasks (-want +got):\n%s", diff)
			}
			sameOnDisk(t, s, path, "after Open")
		})
	}
}

// A store opened on the version 3 ledger of an agent before the journal reads it and
// keeps it in this version's files at once.
func TestOpenUpgradesVersion3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.json")
	writeV3Ledger(t, path)
	s := open(t, path, Options{})
	if diff := cmp.Diff(testLedger().containers(), s.View().Clone()); diff != "" {
		t.Fatalf("ledger read (-want +got):\n%s", diff)
	}
	f, err := loadSnapshot(path, DefaultLimit)
	if err != nil || f.Journal == 0 || len(f.Containers) != 1 {
		t.Errorf("after Open the snapshot is %+v, %v; want this version's, with a journal and the container", f, err)
	}
}

// A snapshot replaced while the store runs (here by a link) is not appended to: the next
// write compacts, which refuses the link.
func TestStoreNoticesAReplacedLedger(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.json")
	s := open(t, path, Options{})
	s.Record(testKey, known.Change{Ref: testRef, Put: map[int]*known.Task{100: task(100, 1)}})
	if err := s.Write(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), path); err != nil {
		t.Fatal(err)
	}
	s.Record(testKey, known.Change{Ref: testRef, Put: map[int]*known.Task{101: task(101, 1)}})
	if err := s.Write(); err == nil {
		t.Error("a write went to a journal no snapshot continues")
	}
	if _, err := os.Lstat(filepath.Join(dir, "elsewhere")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link's target was written: %v", err)
	}
}

// The snapshot and the journal together stay within the ledger's bound: a write that
// would pass it compacts instead, and a ledger that does not fit even compacted is
// refused.
func TestStoreKeepsTheBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.json")
	const limit = 1500
	s := open(t, path, Options{Limit: limit, CompactAt: 1 << 20})
	compactions := 0
	for tid := 100; tid < 130; tid++ {
		snap, _ := os.Stat(path)
		s.Record(testKey, known.Change{Ref: testRef, Put: map[int]*known.Task{tid: task(tid, 1)}})
		if err := s.Write(); err != nil {
			if !errors.Is(err, errFull) || !strings.Contains(err.Error(), "1500 bytes") {
				t.Errorf("task %d: %v, want the bound named", tid, err)
			}
			if compactions == 0 {
				t.Errorf("refused at task %d before any compaction", tid)
			}
			return
		}
		if st := files.Stat(t, path); snap != nil && !os.SameFile(snap, st) {
			compactions++
		}
		if total := files.Stat(t, path).Size() + files.Stat(t, journalPath(path)).Size(); total > limit {
			t.Fatalf("task %d: the ledger's files hold %d bytes, past the bound of %d", tid, total, limit)
		}
		sameOnDisk(t, s, path, fmt.Sprintf("task %d", tid))
	}
	t.Errorf("%d compactions and never refused: want the bound to compact, then refuse", compactions)
}

// After a reboot the ledger's task ids name other tasks: the store drops the ledger before
// its journal is read (a damaged journal of the earlier boot is no damage), and its files
// say the new boot's empty ledger at once.
func TestOpenDropsALedgerOfAnotherBoot(t *testing.T) {
	for name, spoil := range map[string]bool{"intact journal": false, "damaged journal": true} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.json")
			first := open(t, path, Options{BootID: "boot-1"})
			first.Record(testKey, known.Change{Ref: testRef, Put: map[int]*known.Task{100: task(100, 1)}})
			if err := first.Write(); err != nil {
				t.Fatal(err)
			}
			if spoil {
				files.Write(t, journalPath(path), "garbage that no frame starts")
			}
			s, err := Open(path, Options{BootID: "boot-2"})
			if err != nil {
				t.Errorf("Open: %v, want no error", err)
			}
			if s.Len() != 0 {
				t.Errorf("ledger of the earlier boot loaded: %v", s.View().Clone())
			}
			f, err := loadSnapshot(path, DefaultLimit)
			if err != nil || len(f.Containers) != 0 || f.BootID != "boot-2" {
				t.Errorf("snapshot after the reboot = %+v, %v; want empty, of the new boot", f, err)
			}
		})
	}
}

// Temporary files a write killed mid-way left are removed when the store opens.
func TestOpenRemovesStaleTemps(t *testing.T) {
	dir := t.TempDir()
	stale := []string{filepath.Join(dir, ".ledger.json.tmp-4242"), filepath.Join(dir, ".ledger.json.journal.tmp-4243")}
	for _, p := range stale {
		files.Write(t, p, `{"version":2,"containers":[]}`)
	}
	open(t, filepath.Join(dir, "ledger.json"), Options{})
	for _, p := range stale {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale temporary file %s still there: %v", p, err)
		}
	}
}

// A ledger path that is a link is neither read nor written through.
func TestOpenRefusesALink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	files.Write(t, target, `{"version":2,"containers":[{"podUID":"pod","container":"main","tasks":{"100":{"start":1100,"prev":-1,"values":[1]}}}]}`)
	path := filepath.Join(dir, "ledger.json")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, Options{})
	if !errors.Is(err, fsutil.ErrSymlink) || !errors.Is(err, ErrDamaged) || s.Len() != 0 {
		t.Errorf("Open on a link: %v, %d containers; want ErrSymlink, ErrDamaged and none", err, s.Len())
	}
	s.Record(testKey, known.Change{Ref: testRef, Put: map[int]*known.Task{100: task(100, 1)}})
	if err := s.Write(); err == nil {
		t.Error("a write through the link succeeded")
	}
	if got, _ := os.ReadFile(target); !strings.Contains(string(got), `"version":2`) {
		t.Errorf("the link's target was overwritten: %s", got)
	}
}

// errCrash stops a store at a step of its write, as a SIGKILL would.
type errCrash struct{ step string }

// crashAt is a Step hook that crashes (panics with errCrash) at the n-th occurrence of
// step, after writing the first torn bytes of the frame when the step is "append".
func crashAt(step string, n, torn int) func(string, *os.File, []byte) {
	seen := 0
	return func(at string, f *os.File, frame []byte) {
		if at != step {
			return
		}
		if seen++; seen < n {
			return
		}
		if at == "append" && torn > 0 {
			_, _ = f.Write(frame[:min(torn, len(frame)-1)])
		}
		panic(errCrash{at})
	}
}

// A store stopped at any step of a write leaves files that a new store reads, without
// damage, as the ledger before the write or after it: a write is all or nothing. (The
// host tier kills a whole engine with SIGKILL at these steps; here the store is stopped
// in-process, which leaves the same files.)
func TestStoreCrashAtEveryStep(t *testing.T) {
	for _, c := range []struct {
		step string
		torn int
	}{{"append", 0}, {"append", 1}, {"append", 9}, {"append", 1 << 20}, {"written", 0}, {"snapshot", 0}} {
		for _, n := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("%s-%d-torn%d", c.step, n, c.torn), func(t *testing.T) {
				crashInWrites(t, c.step, n, c.torn)
			})
		}
	}
}

// crashInWrites writes a sequence of changes with a store that crashes at the n-th step,
// and checks what a new store reads.
func crashInWrites(t *testing.T, step string, n, torn int) {
	path := filepath.Join(t.TempDir(), "ledger.json")
	s := open(t, path, Options{Step: crashAt(step, n, torn), CompactAt: 1})
	var states []known.Containers // the ledger after each write
	crashed := func() (stopped bool) {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(errCrash); !ok {
					panic(r)
				}
				stopped = true
			}
		}()
		for i := range 10 {
			before := s.View().Clone()
			key := desire.ContainerKey{PodUID: types.UID(fmt.Sprintf("pod-%d", i%2)), Container: "main"}
			s.Record(key, known.Change{Ref: testRef, Put: map[int]*known.Task{100 + i: task(100+i, 1)}})
			states = append(states, before, s.View().Clone())
			if err := s.Write(); err != nil {
				t.Fatal(err)
			}
			if err := s.CompactPastSize(); err != nil {
				t.Fatal(err)
			}
		}
		return false
	}()
	if !crashed {
		t.Skipf("the writes never reached step %s #%d", step, n)
	}
	var log strings.Builder
	again, err := Open(path, Options{Log: funcr.New(func(p, a string) { log.WriteString(p + a + "\n") }, funcr.Options{})})
	if err != nil {
		t.Fatalf("reopened after a crash at %s #%d: %v", step, n, err)
	}
	got := again.View().Clone()
	last := len(states) - 2 // the ledger before the write that crashed, and after it
	if !cmp.Equal(got, states[last], cmpopts.EquateEmpty()) && !cmp.Equal(got, states[last+1], cmpopts.EquateEmpty()) {
		t.Errorf("after a crash at %s #%d the ledger is %v; want %v or %v", step, n, got, states[last], states[last+1])
	}
	if tornRecord := strings.Contains(log.String(), "torn last record"); tornRecord != (step == "append" && torn > 0) {
		t.Errorf("crash at %s (%d bytes written): a torn record dropped: %v", step, torn, tornRecord)
	}
}
