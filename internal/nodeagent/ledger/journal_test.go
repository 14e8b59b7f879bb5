// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"github.com/numapref/numapref/internal/testutil/files"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/numapref/numapref/internal/nodeagent/cgroups"
	"github.com/numapref/numapref/internal/nodeagent/known"
)

// testJournal is a journal of a header and four changes, and where each frame starts
// (ends[i] is where frame i ends).
func testJournal(t testing.TB) (data []byte, recs []journalRecord, ends []int) {
	t.Helper()
	ref := cgroups.ContainerRef{PodUID: "pod", ContainerID: "containerd://x"}
	recs = []journalRecord{
		{Gen: 7},
		{Changes: []containerChange{{PodUID: "pod", Container: "main", Ref: &ref,
			Put: map[int]*known.Task{100: {Start: 1100, Prev: -1, Values: []int{1}}}}}},
		{Changes: []containerChange{{PodUID: "pod", Container: "main",
			Put: map[int]*known.Task{101: {Start: 1101, Prev: -1, Values: []int{1, 0}}}}}},
		{Changes: []containerChange{{PodUID: "pod", Container: "main", Drop: []int{100}},
			{PodUID: "other", Container: "side", Ref: &ref, Put: map[int]*known.Task{7: {Start: 70, Prev: 1, Values: []int{0}}}}}},
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
// the last record drops it (torn), one anywhere in an earlier record (its length, its
// checksum, its payload) is damage. A record is never misread.
func TestParseJournalEveryCorruption(t *testing.T) {
	data, recs, ends := testJournal(t)
	for at := range data {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			bad := bytes.Clone(data)
			bad[at] ^= mask
			got, _, err := parseJournal(bad)
			in := 0
			for ends[in] <= at {
				in++
			}
			if diff := cmp.Diff(recs[:len(got)], got, cmpopts.EquateEmpty()); diff != "" || len(got) > in {
				t.Fatalf("byte %d ^ %#x (record %d): records are not a prefix before it (-want +got):\n%s", at, mask, in, diff)
			}
			last := in == len(recs)-1
			switch {
			case last && (err != nil || len(got) != in):
				t.Fatalf("byte %d ^ %#x in the last record: %d records, %v; want it dropped as torn", at, mask, len(got), err)
			case !last && !errors.Is(err, errJournalDamaged):
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

// writeV3Ledger writes testLedger as an agent before the journal did: a version 3 file.
func writeV3Ledger(t *testing.T, path string) {
	t.Helper()
	good, err := encodeLedgerFile(testLedger())
	if err != nil {
		t.Fatal(err)
	}
	files.Write(t, path, strings.Replace(string(good), `"version":4`, `"version":3`, 1))
}

// restamp recomputes the checksum of the first frame of data, after a change of its payload.
func restamp(data []byte) []byte {
	n := int(data[0]) | int(data[1])<<8
	sum := frameSum(data[:4], data[frameHeader:frameHeader+n])
	data[4], data[5], data[6], data[7] = byte(sum), byte(sum>>8), byte(sum>>16), byte(sum>>24)
	return data
}
