// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/testutil/builders"
)

// TestPreferenceStore: what Save writes a new store reads back, names and specs only; an
// unchanged Save writes nothing; a damaged file, or one of another version, is none.
func TestPreferenceStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "preferences.json")
	s := NewPreferenceStore(path, logr.Discard())
	if _, ok := s.InNamespace("ns"); ok {
		t.Fatal("a store without a file says it knows")
	}
	db := builders.MakePreference("ns", "db").Selector("app", "db").Node(1).Obj()
	db.Labels = map[string]string{"team": "a"}
	web := builders.MakePreference("other", "web").Selector("app", "web").Node(0).Obj()
	s.Save([]numav1.NumaPreference{*web, *db})
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Save([]numav1.NumaPreference{*db, *web})
	if after, err := os.Stat(path); err != nil || !os.SameFile(before, after) {
		t.Errorf("an unchanged Save replaced the file (%v)", err)
	}

	read := NewPreferenceStore(path, logr.Discard())
	got, ok := read.InNamespace("ns")
	if !ok || len(got) != 1 || got[0].Name != "db" || got[0].Spec.Node == nil || *got[0].Spec.Node != 1 || got[0].Labels != nil {
		t.Fatalf("read back %+v, %v; want db at node 1, its spec and name only", got, ok)
	}
	if got, ok := read.InNamespace("empty"); !ok || len(got) != 0 {
		t.Errorf("a namespace without preferences: %v, %v; want none, known", got, ok)
	}

	for name, content := range map[string]string{
		"damaged":          `{"version":1,"preferences":[`,
		"another version":  `{"version":2,"preferences":[]}`,
		"an unknown field": `{"version":1,"preferences":[],"more":true}`,
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, ok := NewPreferenceStore(path, logr.Discard()).InNamespace("ns"); ok {
			t.Errorf("%s file: the store says it knows", name)
		}
	}
}

// One namespace's objects past its share leave that namespace out, named, and nothing else:
// the file is still written for the others (not stale, with a preference deleted since
// still in it), and a start in the left-out namespace waits for the API.
func TestPreferenceStoreNamespaceShare(t *testing.T) {
	path := filepath.Join(t.TempDir(), "preferences.json")
	s := NewPreferenceStore(path, logr.Discard())
	old := builders.MakePreference("small", "old").Selector("app", "db").Node(1).Obj()
	s.Save([]numav1.NumaPreference{*old})

	// A tenant's large objects: 40 preferences of ~30 KiB of selector each, past a
	// namespace's share of the file (preferencesShare) and within the CRD's bounds.
	var prefs []numav1.NumaPreference
	for i := range 40 {
		b := builders.MakePreference("big", fmt.Sprintf("p-%02d", i)).Node(0)
		for j := range 100 {
			b = b.Selector(fmt.Sprintf("k-%03d", j), strings.Repeat("v", 300))
		}
		prefs = append(prefs, *b.Obj())
	}
	kept := builders.MakePreference("small", "new").Selector("app", "db").Node(0).Obj()
	prefs = append(prefs, *kept)
	s.Save(prefs)

	for name, store := range map[string]*PreferenceStore{"in memory": s, "read back": NewPreferenceStore(path, logr.Discard())} {
		got, ok := store.InNamespace("small")
		if !ok || len(got) != 1 || got[0].Name != "new" {
			t.Errorf("%s: namespace small = %v, %v; want only new (old was deleted), known", name, names(got), ok)
		}
		if got, ok := store.InNamespace("big"); ok {
			t.Errorf("%s: namespace big = %d preferences, known; want it left out, unknown", name, len(got))
		}
	}
	if info, err := os.Stat(path); err != nil || info.Size() > preferencesShare {
		t.Errorf("the file: %v, %v; want one within a namespace's share", info, err)
	}
}

func names(prefs []numav1.NumaPreference) []string {
	var out []string
	for _, p := range prefs {
		out = append(out, p.Name)
	}
	return out
}

// unsynced is a cache that has not synced: every read fails, as controller-runtime's does
// once its context ends.
type unsynced struct{ client.Reader }

func (unsynced) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("timed out waiting for cache to be synced")
}

func (unsynced) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("timed out waiting for cache to be synced")
}

// TestStartPlacerWithoutCache: with no cache (an agent restarted while the API is
// unreachable) a start is decided from the persisted NumaPreferences and the sandbox's
// labels; with none persisted, nothing is placed.
func TestStartPlacerWithoutCache(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	start := Start{PodUID: "uid-new", Namespace: "ns", PodName: "db-1", Labels: map[string]string{"app": "db"}, Container: "main", ContainerID: id}
	store := NewPreferenceStore(filepath.Join(t.TempDir(), "preferences.json"), logr.Discard())

	var engine startRecorder
	NewStartPlacer(unsynced{}, cgroups.NewNodeIdentity("node-a"), &engine, store, logr.Discard()).PlaceAtStart(context.Background(), start)
	if len(engine) != 0 {
		t.Fatalf("nothing persisted: placed %+v", engine)
	}
	store.Save([]numav1.NumaPreference{*builders.MakePreference("ns", "db").Selector("app", "db").Node(1).Obj()})
	NewStartPlacer(unsynced{}, cgroups.NewNodeIdentity("node-a"), &engine, store, logr.Discard()).PlaceAtStart(context.Background(), start)
	if len(engine) != 1 || engine[0].Node != 1 || engine[0].Preference != "db" || string(engine[0].PodUID) != "uid-new" {
		t.Fatalf("placed %+v; want db-1 at node 1 from the persisted db", engine)
	}
}

// TestPreferenceStoreKey: Save skips marshalling by the objects' UIDs and generations, and
// still writes each change: a new generation, an object made again, a deleted object, and
// any change of objects that have no generation; a store read from its file rewrites it
// only when its content differs.
func TestPreferenceStoreKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "preferences.json")
	node := func(s *PreferenceStore, name string) int32 {
		t.Helper()
		got, _ := s.InNamespace("ns")
		for _, p := range got {
			if p.Name == name && p.Spec.Node != nil {
				return *p.Spec.Node
			}
		}
		return -1
	}
	inode := func() os.FileInfo {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	pref := func(name string, n int32, gen int64) numav1.NumaPreference {
		p := builders.MakePreference("ns", name).Selector("app", name).Node(n).Obj()
		p.UID, p.Generation = types.UID("uid-"+name), gen
		return *p
	}

	s := NewPreferenceStore(path, logr.Discard())
	s.Save([]numav1.NumaPreference{pref("db", 1, 1), pref("web", 0, 4)})
	first := inode()
	NewPreferenceStore(path, logr.Discard()).Save([]numav1.NumaPreference{pref("web", 0, 4), pref("db", 1, 1)})
	if !os.SameFile(first, inode()) {
		t.Error("a store read from its file wrote the same NumaPreferences again")
	}
	s.Save([]numav1.NumaPreference{pref("db", 0, 2), pref("web", 0, 4)})
	if got := node(NewPreferenceStore(path, logr.Discard()), "db"); got != 0 {
		t.Errorf("after db's spec changed (generation 2): node %d, want 0", got)
	}
	// db deleted and made again: another UID, the same generation, another spec.
	recreated := pref("db", 1, 2)
	recreated.UID = "uid-db-2"
	s.Save([]numav1.NumaPreference{recreated, pref("web", 0, 4)})
	if got := node(NewPreferenceStore(path, logr.Discard()), "db"); got != 1 {
		t.Errorf("after db was made again with node 1: node %d", got)
	}
	// A file whose spec differs from the API's at the same UID and generation (an older
	// agent wrote it, or the API defaults a field since): a new store's first Save
	// replaces it.
	stale := pref("web", 1, 4)
	NewPreferenceStore(path, logr.Discard()).Save([]numav1.NumaPreference{recreated, stale})
	if got := node(NewPreferenceStore(path, logr.Discard()), "web"); got != 1 {
		t.Fatalf("the stale file: web at node %d, want 1", got)
	}
	NewPreferenceStore(path, logr.Discard()).Save([]numav1.NumaPreference{recreated, pref("web", 0, 4)})
	if got := node(NewPreferenceStore(path, logr.Discard()), "web"); got != 0 {
		t.Errorf("a stale file at the API's generations was kept: web at node %d, want 0", got)
	}
	s.Save([]numav1.NumaPreference{recreated})
	if got := node(NewPreferenceStore(path, logr.Discard()), "web"); got != -1 {
		t.Errorf("after web was deleted: still stored, node %d", got)
	}
	// No generation: the objects are compared whole.
	s.Save([]numav1.NumaPreference{pref("db", 1, 0)})
	s.Save([]numav1.NumaPreference{pref("db", 0, 0)})
	if got := node(NewPreferenceStore(path, logr.Discard()), "db"); got != 0 {
		t.Errorf("after a change of an object with no generation: node %d, want 0", got)
	}
}

// BenchmarkPreferenceStoreSaveUnchanged: the node agent's reconcile saves on every pass, and
// almost always nothing changed: 200 NumaPreferences, each with a selector of three labels.
func BenchmarkPreferenceStoreSaveUnchanged(b *testing.B) {
	s := NewPreferenceStore(filepath.Join(b.TempDir(), "preferences.json"), logr.Discard())
	prefs := make([]numav1.NumaPreference, 200)
	for i := range prefs {
		p := builders.MakePreference(fmt.Sprintf("ns-%d", i%20), fmt.Sprintf("pref-%d", i)).
			Selector("app", fmt.Sprintf("app-%d", i)).Selector("tier", "backend").Selector("team", "storage").Node(int32(i % 2)).Obj()
		p.UID, p.Generation = types.UID(fmt.Sprintf("uid-%d", i)), 3
		prefs[i] = *p
	}
	s.Save(prefs)
	b.ReportAllocs()
	for b.Loop() {
		s.Save(prefs)
	}
}
