// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nri

import (
	"bytes"
	"cmp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	numav1 "github.com/numapref/numapref/api/v1alpha1"
	"github.com/numapref/numapref/internal/statefile"
)

// preferencesVersion is the format of a PreferenceStore's file.
const preferencesVersion = 1

// preferencesLimit bounds the file: a NumaPreference is a few KiB at most (its selector is
// bounded by validation), and one node's namespaces hold few.
const preferencesLimit = 8 << 20

// preferencesPayload is what a PreferenceStore writes: the NumaPreferences, names and
// specs only, sorted by namespace and name.
type preferencesPayload struct {
	Preferences []numav1.NumaPreference `json:"preferences"`
}

// preferencesFile is the store's file. Strict: a member this agent does not know is an
// older or newer format, not one to misread as no preferences.
func preferencesFile(path string) statefile.File[preferencesPayload] {
	return statefile.File[preferencesPayload]{Path: path, Version: preferencesVersion, Limit: preferencesLimit, Strict: true}
}

// PreferenceStore keeps, in the agent's state directory, the NumaPreferences of the
// namespaces that have pods on this node, as the API last had them. An agent restarted
// while the API is unreachable has nothing in its cache: StartPlacer then decides for the
// containers the runtime starts from these, as the engine enforces its persisted desired
// state for those already running. The node agent's reconciler saves them (Save), only
// when they changed.
type PreferenceStore struct {
	file statefile.File[preferencesPayload]
	log  logr.Logger

	mu    sync.Mutex
	data  []byte // the file's content, as last read or written
	key   string // data's preferencesKey; "" when unknown (read from the file, or after a failed write)
	byNS  map[string][]numav1.NumaPreference
	saved bool // the file holds data
}

// NewPreferenceStore reads the store at path, if there is one. A file that cannot be read
// (damaged, of another version, past its bound) is logged and left: the store holds
// nothing until the next Save replaces it.
func NewPreferenceStore(path string, log logr.Logger) *PreferenceStore {
	s := &PreferenceStore{file: preferencesFile(path), log: log, byNS: map[string][]numav1.NumaPreference{}}
	f, data, found, err := s.file.LoadRaw()
	if err != nil {
		log.Error(err, "Persisted NumaPreferences unreadable: containers started before the API answers are placed once it does", "path", path)
		return s
	}
	if !found {
		return s
	}
	// No key for what was read: an older agent, or the API's defaults, may have given the
	// same generations another spec than this agent marshals. The first Save compares
	// the bytes.
	s.data, s.saved = data, true
	s.index(f.Preferences)
	return s
}

// InNamespace returns the stored NumaPreferences of namespace; ok is false when the store
// holds none at all (no file), so that a namespace without any is told from no knowledge.
func (s *PreferenceStore) InNamespace(namespace string) (prefs []numav1.NumaPreference, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.byNS[namespace]), s.saved
}

// Save stores prefs, those of the namespaces with pods on this node, unless the store holds
// them already. A failed write is logged; the next Save tries again.
func (s *PreferenceStore) Save(prefs []numav1.NumaPreference) {
	// The reconciler calls this on every pass, and almost always nothing changed: the
	// key tells so without copying or marshalling the objects.
	sorted := make([]*numav1.NumaPreference, len(prefs))
	for i := range prefs {
		sorted[i] = &prefs[i]
	}
	slices.SortFunc(sorted, func(a, b *numav1.NumaPreference) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	key := preferencesKey(sorted)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.saved && key != "" && key == s.key {
		return
	}
	f := preferencesPayload{Preferences: make([]numav1.NumaPreference, 0, len(sorted))}
	for _, p := range sorted {
		f.Preferences = append(f.Preferences, numav1.NumaPreference{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Generation: p.Generation},
			Spec:       p.Spec,
		})
	}
	data, err := s.file.Encode(f)
	if err == nil && s.saved && bytes.Equal(data, s.data) {
		s.key = key
		return
	}
	if err == nil {
		err = s.file.Write(data)
	}
	if err != nil {
		// The file may hold the new content or the old (a failure after the rename): the
		// next Save compares nothing and writes.
		s.data, s.key = nil, ""
		s.log.Error(err, "Persisting the NumaPreferences; an agent restarted while the API is unreachable would place new containers from older ones", "path", s.file.Path)
		return
	}
	s.data, s.key, s.saved = data, key, true
	s.index(f.Preferences)
}

// preferencesKey tells one sorted list of NumaPreferences from another without marshalling
// them: their namespaces, names, UIDs and generations. The API raises a NumaPreference's
// generation with every change of its spec, and the store keeps nothing else of it. A list
// with an object of no generation (never one from the API) has no key, "": it is always
// marshalled and compared.
func preferencesKey(prefs []*numav1.NumaPreference) string {
	var b strings.Builder
	for _, p := range prefs {
		if p.Generation == 0 {
			return ""
		}
		for _, s := range []string{p.Namespace, "/", p.Name, "/", string(p.UID), "/", strconv.FormatInt(p.Generation, 10), "\n"} {
			b.WriteString(s)
		}
	}
	return b.String()
}

// index replaces byNS with prefs. s.mu is held, or s is not shared yet.
func (s *PreferenceStore) index(prefs []numav1.NumaPreference) {
	clear(s.byNS)
	for _, p := range prefs {
		s.byNS[p.Namespace] = append(s.byNS[p.Namespace], p)
	}
}
