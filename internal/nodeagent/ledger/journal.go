// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package ledger

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/desire"
	"github.com/numapref/numapref/internal/nodeagent/known"
	"github.com/numapref/numapref/internal/statedir"
)

// The ledger's journal: the ledger file (ledger.json) is a snapshot, and beside it the
// journal (ledger.json.journal) holds what changed since, one record per write, appended
// with one write (no fsync: doc.go's durability contract). A fork pass that SETs thus
// writes ahead one small record, not the whole ledger. The journal is compacted (a new
// snapshot, then an empty journal) at start, when it grows past the snapshot's size, and
// when the bound requires it (write.go).
//
// A record on disk is a frame: the payload's length (4 bytes, little endian), the CRC-32C
// of the length's bytes and the payload (4 bytes), and the payload, a JSON journalRecord.
// The first record of a journal is its header: the generation of the snapshot it
// continues. A snapshot names the generation of its journal; a journal of another
// generation (left by a compaction killed between its two renames) is stale: the snapshot
// already holds what it says, and it is ignored.
//
// Records are written one after the other by one process, so the agent's death can tear
// only the last (a write cut short by SIGKILL): a record that fails its check with no
// valid record after it is that torn last record, and is dropped (its SETs were never
// issued: they wait for the write to return). A record
// that fails its check and is followed by a valid one was damaged after it was written:
// the ledger is damaged (ErrDamaged), and what the records before it say is kept.
// A record is never misread: its bytes are used only when its checksum matches.

// journalPath is the journal beside the ledger file at ledgerPath.
func journalPath(ledgerPath string) string { return statedir.JournalOf(ledgerPath) }

// frameHeader is the size of a frame's length and checksum.
const frameHeader = 8

// castagnoli is the CRC-32C table (SSE4.2 and ARMv8 compute it in hardware).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// journalRecord is one record's payload: the header (Gen only) or a change.
type journalRecord struct {
	// Gen is the generation of the snapshot a journal continues, in its header only.
	Gen     uint64            `json:"gen,omitempty"`
	Changes []containerChange `json:"changes,omitempty"`
}

// containerChange is what changed in the ledger entry of one container. Each field says
// what the entry now is, never how it moved, so a record applied twice changes nothing.
type containerChange struct {
	PodUID    string `json:"podUID"`
	Container string `json:"container"`
	// Gone means the entry was forgotten (the rest is empty).
	Gone bool `json:"gone,omitempty"`
	// Ref is the container's reference, when new or changed.
	Ref *cgroups.ContainerRef `json:"ref,omitempty"`
	// Put are tasks recorded or changed, Drop tasks forgotten.
	Put  map[int]*known.Task `json:"put,omitempty"`
	Drop []int               `json:"drop,omitempty"`
}

func (c *containerChange) key() desire.ContainerKey {
	return (&known.Container{PodUID: c.PodUID, Container: c.Container}).Key()
}

// encodeFrame frames the payload of rec.
func encodeFrame(rec journalRecord) ([]byte, error) {
	payload, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encoding a ledger journal record: %w", err)
	}
	frame := make([]byte, frameHeader, frameHeader+len(payload))
	binary.LittleEndian.PutUint32(frame, uint32(len(payload)))
	binary.LittleEndian.PutUint32(frame[4:], frameSum(frame[:4], payload))
	return append(frame, payload...), nil
}

func frameSum(length, payload []byte) uint32 {
	return crc32.Update(crc32.Checksum(length, castagnoli), castagnoli, payload)
}

// nextFrame checks the frame at the start of data: its payload and size when valid; ok
// false when data holds no valid frame there (too short, cut, or a wrong checksum).
func nextFrame(data []byte) (payload []byte, size int, ok bool) {
	if len(data) < frameHeader {
		return nil, 0, false
	}
	n := int(binary.LittleEndian.Uint32(data))
	if n == 0 || n > len(data)-frameHeader {
		return nil, 0, false
	}
	payload = data[frameHeader : frameHeader+n]
	if frameSum(data[:4], payload) != binary.LittleEndian.Uint32(data[4:]) {
		return nil, 0, false
	}
	return payload, frameHeader + n, true
}

// errJournalDamaged is a record damaged after it was written (a valid one follows it).
var errJournalDamaged = errors.New("a record of the journal is damaged")

// parseJournal reads the records of a journal file. It returns the valid records in
// order and how many bytes a torn last record took (dropped). A damaged record followed
// by a valid one, or a valid frame whose payload is not a record, ends the records read
// with an error wrapping errJournalDamaged.
func parseJournal(data []byte) (recs []journalRecord, torn int, err error) {
	for off := 0; off < len(data); {
		payload, size, ok := nextFrame(data[off:])
		if !ok {
			if followedByARecord(data[off:]) {
				return recs, 0, fmt.Errorf("%w at byte %d, of %d", errJournalDamaged, off, len(data))
			}
			return recs, len(data) - off, nil
		}
		var rec journalRecord
		if err := json.Unmarshal(payload, &rec); err != nil {
			return recs, 0, fmt.Errorf("%w at byte %d: a valid frame holds no record: %w", errJournalDamaged, off, err)
		}
		recs = append(recs, rec)
		off += size
	}
	return recs, 0, nil
}

// followedByARecord says whether a valid frame starts anywhere after the invalid one at
// the start of data: proof that it is not the last record. Its own length is not trusted
// to say where it ends: a damaged length would hide the records after it. Only a damaged
// journal, or the few bytes of a torn last record, are scanned.
func followedByARecord(data []byte) bool {
	for i := 1; i+frameHeader <= len(data); i++ {
		if _, _, ok := nextFrame(data[i:]); ok {
			return true
		}
	}
	return false
}

// replayJournal applies the records of a journal to l, the snapshot's ledger of
// generation gen. A journal of another generation is stale: nothing is applied (stale
// true). A record that names no container is damage.
func replayJournal(l known.Containers, gen uint64, recs []journalRecord) (stale bool, err error) {
	if len(recs) == 0 {
		return false, nil
	}
	if recs[0].Gen != gen || gen == 0 {
		return true, nil
	}
	for i, rec := range recs[1:] {
		for _, c := range rec.Changes {
			if c.PodUID == "" || c.Container == "" || rec.Gen != 0 {
				return false, fmt.Errorf("%w: record %d names no container", errJournalDamaged, i+1)
			}
			applyChange(l, &c)
		}
	}
	return false, nil
}

// applyChange makes change c to the containers l.
func applyChange(l known.Containers, c *containerChange) {
	key := c.key()
	if c.Gone {
		delete(l, key)
		return
	}
	entry := l[key]
	if entry == nil {
		entry = &known.Container{PodUID: c.PodUID, Container: c.Container, Tasks: map[int]*known.Task{}}
		l[key] = entry
	}
	if c.Ref != nil {
		entry.Ref = *c.Ref
	}
	for tid, t := range c.Put {
		if t != nil && tid > 0 {
			entry.Tasks[tid] = t.Clone()
		}
	}
	for _, tid := range c.Drop {
		delete(entry.Tasks, tid)
	}
}

// diffTasks is the change that makes tasks tids of the entry disk into live's (nil for
// none), where nothing else of it changed; either may be nil (no entry: then the whole
// entries are compared).
func diffTasks(key desire.ContainerKey, live, disk *known.Container, tids map[int]bool) *containerChange {
	if live == nil || disk == nil || live.Ref != disk.Ref {
		return diffEntries(key, live, disk)
	}
	c := &containerChange{PodUID: string(key.PodUID), Container: key.Container}
	for tid := range tids {
		t, d := live.Tasks[tid], disk.Tasks[tid]
		switch {
		case t == nil && d != nil:
			c.Drop = append(c.Drop, tid)
		case t != nil && (d == nil || !d.Equal(t)):
			if c.Put == nil {
				c.Put = map[int]*known.Task{}
			}
			c.Put[tid] = t
		}
	}
	slices.Sort(c.Drop)
	if c.Put == nil && c.Drop == nil {
		return nil
	}
	return c
}

// diffEntries is the change that makes the entry disk into live (nil for none); either
// may be nil (no entry).
func diffEntries(key desire.ContainerKey, live, disk *known.Container) *containerChange {
	c := &containerChange{PodUID: string(key.PodUID), Container: key.Container}
	switch {
	case live == nil && disk == nil:
		return nil
	case live == nil:
		c.Gone = true
		return c
	case disk == nil:
		disk = &known.Container{}
		c.Ref = &live.Ref
	case disk.Ref != live.Ref:
		c.Ref = &live.Ref
	}
	for tid, t := range live.Tasks {
		if d := disk.Tasks[tid]; d == nil || !d.Equal(t) {
			if c.Put == nil {
				c.Put = map[int]*known.Task{}
			}
			c.Put[tid] = t
		}
	}
	for tid := range disk.Tasks {
		if live.Tasks[tid] == nil {
			c.Drop = append(c.Drop, tid)
		}
	}
	slices.Sort(c.Drop)
	if c.Ref == nil && c.Put == nil && c.Drop == nil {
		return nil
	}
	return c
}
