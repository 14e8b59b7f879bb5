// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package nri

import (
	"bytes"
	"cmp"
	"encoding/json"
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

// preferencesShare bounds one namespace's part of the file. A namespace whose
// NumaPreferences take more is left out, and named as such: its containers started while
// the API is unreachable wait for the API, and no tenant's objects can make the file fail
// to save, and so go stale, for the others.
const preferencesShare = preferencesLimit / 8

// preferencesPayload is what a PreferenceStore writes: the NumaPreferences, names and
// specs only, sorted by namespace and name, and the namespaces left out (preferencesShare).
type preferencesPayload struct {
	Preferences []numav1.NumaPreference `json:"preferences"`
	Omitted     []string                `json:"omitted,omitempty"`
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

	mu      sync.Mutex
	data    []byte // the file's content, as last read or written
	key     string // data's preferencesKey; "" when unknown (read from the file, or after a failed write)
	byNS    map[string][]numav1.NumaPreference
	omitted map[string]bool // namespaces left out of the last save: nothing is known of them
	saved   bool            // the store holds the API's word: read from the file, or saved
}

// NewPreferenceStore reads the store at path, if there is one. A file that cannot be read
// (damaged, of another version, past its bound) is logged and left: the store holds
// nothing until the next Save replaces it.
func NewPreferenceStore(path string, log logr.Logger) *PreferenceStore {
	s := &PreferenceStore{file: preferencesFile(path), log: log, byNS: map[string][]numav1.NumaPreference{}, omitted: map[string]bool{}}
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
	s.index(f)
	return s
}

// InNamespace returns the stored NumaPreferences of namespace; ok is false when the store
// holds none at all (no file), or left the namespace out (preferencesShare), so that a
// namespace without any is told from no knowledge.
func (s *PreferenceStore) InNamespace(namespace string) (prefs []numav1.NumaPreference, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.omitted[namespace] {
		return nil, false
	}
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
	f := fitPreferences(sorted)
	if len(f.Omitted) > 0 {
		s.log.Info("Left namespaces out of the persisted NumaPreferences: theirs take more than a namespace's share; "+
			"their containers started while the API is unreachable wait for it", "namespaces", f.Omitted, "share", preferencesShare)
	}
	// What this agent uses is the API's latest word, whatever the disk does.
	s.index(f)
	s.saved = true
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
	s.data, s.key = data, key
}

// fitPreferences is the payload of sorted (by namespace, then name): names and specs only,
// without the namespaces whose part passes preferencesShare, and, should the rest still
// pass the file's bound (many namespaces near their share), without the largest of them
// until it fits.
func fitPreferences(sorted []*numav1.NumaPreference) preferencesPayload {
	type part struct {
		ns    string
		size  int
		prefs []numav1.NumaPreference
	}
	var parts []part
	total := 0
	var f preferencesPayload
	for start := 0; start < len(sorted); {
		pt := part{ns: sorted[start].Namespace}
		end := start
		for ; end < len(sorted) && sorted[end].Namespace == pt.ns; end++ {
			p := sorted[end]
			pt.prefs = append(pt.prefs, numav1.NumaPreference{
				ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Generation: p.Generation},
				Spec:       p.Spec,
			})
			if pt.size <= preferencesShare { // past it, the namespace is out: stop counting
				b, err := json.Marshal(pt.prefs[len(pt.prefs)-1])
				pt.size += len(b) + 1
				if err != nil {
					pt.size = preferencesShare + 1
				}
			}
		}
		if pt.size > preferencesShare {
			f.Omitted = append(f.Omitted, pt.ns)
		} else {
			parts = append(parts, pt)
			total += pt.size
		}
		start = end
	}
	// Room for the envelope and the omitted namespaces' names.
	for room := preferencesLimit - 64<<10; total > room; {
		largest := 0
		for i := range parts {
			if parts[i].size > parts[largest].size {
				largest = i
			}
		}
		f.Omitted = append(f.Omitted, parts[largest].ns)
		total -= parts[largest].size
		parts = slices.Delete(parts, largest, largest+1)
	}
	slices.Sort(f.Omitted)
	f.Preferences = make([]numav1.NumaPreference, 0, len(sorted))
	for _, pt := range parts {
		f.Preferences = append(f.Preferences, pt.prefs...)
	}
	return f
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

// index replaces byNS and omitted with f's. s.mu is held, or s is not shared yet.
func (s *PreferenceStore) index(f preferencesPayload) {
	clear(s.byNS)
	clear(s.omitted)
	for _, p := range f.Preferences {
		s.byNS[p.Namespace] = append(s.byNS[p.Namespace], p)
	}
	for _, ns := range f.Omitted {
		s.omitted[ns] = true
	}
}
