package nodeagent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/numapref/numapref/internal/fsutil"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
)

// FuzzDecodeLedger: any file content yields a usable ledger (maybe empty, with an error),
// never a panic, and what is decoded survives an encode and a decode unchanged.
func FuzzDecodeLedger(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `{"version":1}`, `{"version":1,"containers":null}`,
		`{"version":1,"containers":[{"podUID":"u","container":"c","ref":{"podUID":"u","containerID":"containerd://x"},"tasks":{"12":{"start":5,"prev":-1,"values":[0]}}}]}`,
		`{"version":1,"containers":[null,{"podUID":"","container":"c"}]}`,
		`{"version":3,"containers":[]}`, `{"version":2,"bootID":"b","containers":[]}`, `{"version":1,"containers":[{"podUID":"u","container":"c","tasks":{"-3":null,"4":null}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		f, _ := decodeLedgerFile(data)
		l := f.ledger()
		for k, c := range l {
			for tid, te := range c.Tasks {
				if te == nil || tid <= 0 {
					t.Fatalf("container %v kept task %d = %v", k, tid, te)
				}
			}
		}
		enc, err := encodeLedgerFile(ledgerFile{BootID: f.BootID, Containers: l.sorted()})
		if err != nil {
			t.Fatalf("encoding a decoded ledger: %v", err)
		}
		again, err := decodeLedgerFile(enc)
		if err != nil {
			t.Fatalf("an encoded ledger does not decode: %v\n%s", err, enc)
		}
		if diff := cmp.Diff(l, again.ledger()); diff != "" {
			t.Errorf("encode and decode changed the ledger (-decoded +again):\n%s", diff)
		}
	})
}

// testLedger is a ledger of one container with one task, as the engine records it.
func testLedger() ledgerFile {
	return ledgerFile{BootID: "b", Containers: []*containerEntry{{
		PodUID: "pod", Container: "main", Ref: cgroups.ContainerRef{PodUID: "pod", ContainerID: "containerd://x"},
		Tasks: map[int]*taskEntry{100: {Start: 1100, Prev: -1, Values: []int{1}}},
	}}}
}

// The ledger carries a checksum of its content: any change of the content is seen as
// damage (ErrLedgerDamaged), never read as a smaller or different ledger. Files of
// versions 1 and 2, which have no checksum, are still read.
func TestLoadLedger(t *testing.T) {
	good, err := encodeLedgerFile(testLedger())
	if err != nil {
		t.Fatal(err)
	}
	legacy := `{"version":2,"bootID":"b","containers":[{"podUID":"pod","container":"main","ref":{"podUID":"pod","containerID":"containerd://x"},` +
		`"tasks":{"100":{"start":1100,"prev":-1,"values":[1]}}}]}`
	for name, c := range map[string]struct {
		content string
		limit   int
		want    error // nil: the test ledger is read
	}{
		"written by the agent":   {content: string(good)},
		"version 2, no checksum": {content: legacy},
		"version 1, no checksum": {content: strings.Replace(legacy, `"version":2,"bootID":"b",`, `"version":1,"bootID":"b",`, 1)},
		"a task's value changed": {content: strings.Replace(string(good), `"values":[1]`, `"values":[0]`, 1), want: ErrLedgerDamaged},
		"a container dropped":    {content: strings.Replace(string(good), `"containers":[{`, `"containers":[],"x":[{`, 1), want: ErrLedgerDamaged},
		"checksum missing":       {content: strings.Replace(string(good), `"sha256":"`, `"sha256":"x`, 1), want: ErrLedgerDamaged},
		"truncated":              {content: string(good[:len(good)/2]), want: ErrLedgerDamaged},
		"version 3, no journal":  {content: strings.Replace(string(good), `"version":4`, `"version":3`, 1)},
		"unknown version":        {content: strings.Replace(string(good), `"version":4`, `"version":5`, 1), want: ErrLedgerDamaged},
		"past its bound":         {content: string(good), limit: len(good) - 1, want: fsutil.ErrTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.json")
			writeFile(t, path, c.content)
			limit := c.limit
			if limit == 0 {
				limit = defaultLedgerLimit
			}
			f, err := loadLedger(path, limit)
			if c.want != nil {
				if !errors.Is(err, c.want) || !errors.Is(err, ErrLedgerDamaged) {
					t.Errorf("loadLedger = %v, want %v and ErrLedgerDamaged", err, c.want)
				}
				if len(f.Containers) != 0 {
					t.Errorf("a damaged ledger yielded entries: %+v", f.Containers)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(testLedger().ledger(), f.ledger()); diff != "" {
				t.Errorf("ledger read (-want +got):\n%s", diff)
			}
		})
	}
}

// A ledger that cannot be read at all (here a directory in its place) is damaged too.
func TestLoadLedgerUnreadable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.json")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := loadLedger(path, defaultLedgerLimit); !errors.Is(err, ErrLedgerDamaged) {
		t.Errorf("loadLedger of a directory = %v, want ErrLedgerDamaged", err)
	}
}

// NewEngine reports a damaged ledger as ErrLedgerDamaged and in numapref_ledger_damaged,
// and the engine still works: tasks it recognises (here the one with the wanted value) are
// handled as for an empty ledger.
func TestEngineReportsADamagedLedger(t *testing.T) {
	for name, c := range map[string]struct {
		content string
		damaged bool
	}{
		"missing": {},
		"intact":  {content: "good"},
		"damaged": {content: "bad", damaged: true},
	} {
		t.Run(name, func(t *testing.T) {
			h := newFakeHost(t)
			h.addTask(100, -1)
			path := filepath.Join(t.TempDir(), "ledger.json")
			good, err := encodeLedgerFile(testLedger())
			if err != nil {
				t.Fatal(err)
			}
			switch c.content {
			case "good":
				writeFile(t, path, string(good))
			case "bad":
				writeFile(t, path, strings.Replace(string(good), `"start":1100`, `"start":1101`, 1))
			}
			m := NewMetrics()
			e, err := h.newEngine(EngineConfig{LedgerPath: path, Metrics: m})
			if got := errors.Is(err, ErrLedgerDamaged); got != c.damaged {
				t.Errorf("NewEngine error %v; damaged %v, want %v", err, got, c.damaged)
			}
			want := 0.0
			if c.damaged {
				want = 1
			}
			if got := testutil.ToFloat64(m.ledgerDamaged); got != want {
				t.Errorf("numapref_ledger_damaged = %v, want %v", got, want)
			}
			e.SetDesired([]Desire{fakeDesire(1)})
			e.Pass()
			if v := h.value(100); v != 1 {
				t.Errorf("task 100 holds %d, want 1", v)
			}
		})
	}
}
