// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// procMessage builds one proc connector datagram: nlmsghdr, cn_msg, proc_event.
func procMessage(what uint32, ack uint32, timestamp uint64, data ...int32) []byte {
	ne := binary.NativeEndian
	var ev []byte
	ev = ne.AppendUint32(ev, what)
	ev = ne.AppendUint32(ev, 1) // cpu
	ev = ne.AppendUint64(ev, timestamp)
	for _, d := range data {
		ev = ne.AppendUint32(ev, uint32(d))
	}
	for len(ev) < 16+24 { // the union is 24 bytes (exit) or more
		ev = append(ev, 0)
	}
	var b []byte
	b = ne.AppendUint32(b, uint32(nlmsgHdrLen+cnMsgLen+len(ev)))
	b = ne.AppendUint16(b, 3)
	b = ne.AppendUint16(b, 0)
	b = ne.AppendUint32(b, 7)
	b = ne.AppendUint32(b, 0)
	b = ne.AppendUint32(b, cnIdxProc)
	b = ne.AppendUint32(b, cnValProc)
	b = ne.AppendUint32(b, 7)
	b = ne.AppendUint32(b, ack)
	b = ne.AppendUint16(b, uint16(len(ev)))
	b = ne.AppendUint16(b, 0)
	return append(b, ev...)
}

func TestParseProcMessages(t *testing.T) {
	other := procMessage(procEventWhatFork, 0, 1, 1, 1, 2, 2)
	binary.NativeEndian.PutUint32(other[16:], 5) // another connector user's index
	tests := map[string]struct {
		in      []byte
		want    []ProcEvent
		wantErr bool
	}{
		"fork of a process": {
			in:   procMessage(procEventWhatFork, 0, 99, 100, 100, 200, 200),
			want: []ProcEvent{{Kind: ProcEventFork, ParentTID: 100, ParentTGID: 100, ChildTID: 200, ChildTGID: 200, TimestampNs: 99}},
		},
		"fork of a thread": {
			in:   procMessage(procEventWhatFork, 0, 5, 1, 1, 201, 200),
			want: []ProcEvent{{Kind: ProcEventFork, ParentTID: 1, ParentTGID: 1, ChildTID: 201, ChildTGID: 200, TimestampNs: 5}},
		},
		"exec": {
			in:   procMessage(procEventWhatExec, 0, 6, 200, 200),
			want: []ProcEvent{{Kind: ProcEventExec, ChildTID: 200, ChildTGID: 200, TimestampNs: 6}},
		},
		"exit": {
			in:   procMessage(procEventWhatExit, 0, 7, 201, 200, 0, 17, 1, 1),
			want: []ProcEvent{{Kind: ProcEventExit, ChildTID: 201, ChildTGID: 200, TimestampNs: 7}},
		},
		"comm": {
			in:   procMessage(procEventWhatComm, 0, 8, 200, 200),
			want: []ProcEvent{{Kind: procEventComm, ChildTID: 200, ChildTGID: 200, TimestampNs: 8}},
		},
		"ack": {
			in:   procMessage(procEventWhatNone, 43, 9, 0),
			want: []ProcEvent{{Kind: procEventAck, TimestampNs: 9, ackAck: 43}},
		},
		"two messages in one datagram": {
			in: append(procMessage(procEventWhatExec, 0, 1, 3, 3), procMessage(procEventWhatExit, 0, 2, 3, 3)...),
			want: []ProcEvent{
				{Kind: ProcEventExec, ChildTID: 3, ChildTGID: 3, TimestampNs: 1},
				{Kind: ProcEventExit, ChildTID: 3, ChildTGID: 3, TimestampNs: 2},
			},
		},
		"uid change is skipped":    {in: procMessage(0x4, 0, 1, 3, 3, 0, 0)},
		"another connector user":   {in: other},
		"truncated header":         {in: []byte{1, 2, 3}, wantErr: true},
		"length beyond the buffer": {in: procMessage(procEventWhatExec, 0, 1, 3, 3)[:40], wantErr: true},
		"connector data too long": {
			in: func() []byte {
				b := procMessage(procEventWhatExec, 0, 1, 3, 3)
				binary.NativeEndian.PutUint16(b[nlmsgHdrLen+16:], 500)
				return b
			}(),
			wantErr: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseProcMessages(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(ProcEvent{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestListenMessage(t *testing.T) {
	b := appendListenMessage(nil, 42, procCnMcastListen)
	ne := binary.NativeEndian
	if len(b) != 40 || ne.Uint32(b[0:]) != 40 || ne.Uint32(b[16:]) != cnIdxProc || ne.Uint32(b[20:]) != cnValProc ||
		ne.Uint32(b[28:]) != 42 || ne.Uint16(b[32:]) != 4 || ne.Uint32(b[36:]) != procCnMcastListen {
		t.Errorf("listen message % x", b)
	}
}

func FuzzParseProcMessages(f *testing.F) {
	f.Add(procMessage(procEventWhatFork, 0, 99, 100, 100, 200, 200))
	f.Add(append(procMessage(procEventWhatExec, 0, 1, 3, 3), procMessage(procEventWhatExit, 0, 2, 3, 3)...))
	f.Add(procMessage(procEventWhatNone, 1, 9, 0))
	f.Add([]byte{16, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseProcMessages(b)
	})
}
