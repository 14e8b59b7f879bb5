// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package numa

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ProcEventKind is the kind of a proc connector event.
type ProcEventKind int

const (
	// ProcEventFork: a task was created (a process or a thread; the event carries no
	// clone flags). Parent* name the creator's real parent for a thread, see ProcEvent.
	ProcEventFork ProcEventKind = iota + 1
	// ProcEventExec: a task called execve successfully.
	ProcEventExec
	// ProcEventExit: a task exited.
	ProcEventExit
	// ProcEventLost: the receive buffer overflowed; an unknown number of events are gone.
	ProcEventLost

	// procEventComm: a task changed its name (prctl PR_SET_NAME). The emulator makes one
	// as a barrier that wakes its reader; ProcConn.Read does not pass it on.
	procEventComm
	// procEventAck: the kernel's answer to a subscription.
	procEventAck
)

func (k ProcEventKind) String() string {
	switch k {
	case ProcEventFork:
		return "fork"
	case ProcEventExec:
		return "exec"
	case ProcEventExit:
		return "exit"
	case ProcEventLost:
		return "lost"
	case procEventComm:
		return "comm"
	case procEventAck:
		return "ack"
	}
	return fmt.Sprintf("ProcEventKind(%d)", int(k))
}

// ProcEvent is one event of the kernel's proc connector (cn_proc).
//
// For a fork, ChildTID/ChildTGID name the new task and ParentTID/ParentTGID the task's
// real_parent. For a new process that is the thread that called clone(); for a new thread
// (ChildTID != ChildTGID) it is the parent of the whole thread group, not the creating
// thread. For Exec and Exit the task is in ChildTID/ChildTGID.
type ProcEvent struct {
	Kind       ProcEventKind `json:"kind"`
	ParentTID  int           `json:"parentTid,omitempty"`
	ParentTGID int           `json:"parentTgid,omitempty"`
	ChildTID   int           `json:"childTid,omitempty"`
	ChildTGID  int           `json:"childTgid,omitempty"`
	// TimestampNs is the kernel's CLOCK_MONOTONIC time of the event.
	TimestampNs uint64 `json:"timestampNs,omitempty"`

	// ackAck and ackErr are set for procEventAck.
	ackAck, ackErr uint32
}

// Connector protocol constants (include/uapi/linux/connector.h, cn_proc.h).
const (
	cnIdxProc         = 1
	cnValProc         = 1
	procCnMcastListen = 1
	procCnMcastIgnore = 2

	nlmsgHdrLen     = 16
	cnMsgLen        = 20
	procEventHdrLen = 16 // what, cpu, timestamp_ns

	procEventWhatNone = 0x00000000
	procEventWhatFork = 0x00000001
	procEventWhatExec = 0x00000002
	procEventWhatComm = 0x00000200
	procEventWhatExit = 0x80000000
)

var errShortMessage = errors.New("short proc connector message")

// parseProcMessages decodes the netlink datagram buf into proc connector events. Unknown
// event kinds and messages for other connector users are skipped.
func parseProcMessages(buf []byte) ([]ProcEvent, error) { return appendProcMessages(nil, buf) }

// appendProcMessages is parseProcMessages appending to events.
func appendProcMessages(events []ProcEvent, buf []byte) ([]ProcEvent, error) {
	ne := binary.NativeEndian
	for len(buf) > 0 {
		if len(buf) < nlmsgHdrLen {
			return events, errShortMessage
		}
		msgLen := int(ne.Uint32(buf[0:4]))
		if msgLen < nlmsgHdrLen || msgLen > len(buf) {
			return events, fmt.Errorf("netlink message length %d out of range (%d bytes left)", msgLen, len(buf))
		}
		if ev, ok, err := parseCnMsg(buf[nlmsgHdrLen:msgLen]); err != nil {
			return events, err
		} else if ok {
			events = append(events, ev)
		}
		next := (msgLen + 3) &^ 3
		if next > len(buf) {
			break
		}
		buf = buf[next:]
	}
	return events, nil
}

func parseCnMsg(b []byte) (ProcEvent, bool, error) {
	ne := binary.NativeEndian
	if len(b) < cnMsgLen {
		return ProcEvent{}, false, errShortMessage
	}
	idx, val := ne.Uint32(b[0:4]), ne.Uint32(b[4:8])
	ack := ne.Uint32(b[12:16])
	dataLen := int(ne.Uint16(b[16:18]))
	if idx != cnIdxProc || val != cnValProc {
		return ProcEvent{}, false, nil
	}
	if dataLen > len(b)-cnMsgLen {
		return ProcEvent{}, false, fmt.Errorf("connector data length %d exceeds message (%d bytes)", dataLen, len(b)-cnMsgLen)
	}
	return parseProcEvent(b[cnMsgLen:cnMsgLen+dataLen], ack)
}

// parseProcEvent reads the proc_event d of a connector message whose ack field is ack;
// false for a kind the engine does not read.
func parseProcEvent(d []byte, ack uint32) (ProcEvent, bool, error) {
	ne := binary.NativeEndian
	if len(d) < procEventHdrLen {
		return ProcEvent{}, false, errShortMessage
	}
	kind, need, ok := procEventKind(ne.Uint32(d[0:4]))
	if !ok {
		return ProcEvent{}, false, nil
	}
	ev := ProcEvent{Kind: kind, TimestampNs: ne.Uint64(d[8:16])}
	data := d[procEventHdrLen:]
	if len(data) < 4*need {
		return ProcEvent{}, false, errShortMessage
	}
	i32 := func(i int) int { return int(int32(ne.Uint32(data[4*i : 4*i+4]))) }
	switch ev.Kind {
	case procEventAck:
		ev.ackAck, ev.ackErr = ack, ne.Uint32(data[0:4])
	case ProcEventFork:
		ev.ParentTID, ev.ParentTGID, ev.ChildTID, ev.ChildTGID = i32(0), i32(1), i32(2), i32(3)
	default:
		ev.ChildTID, ev.ChildTGID = i32(0), i32(1)
	}
	return ev, true, nil
}

// procEventKind is the kind of a proc_event's what field and how many 32-bit words of its
// data are read; false for the kinds the engine does not read.
func procEventKind(what uint32) (kind ProcEventKind, words int, ok bool) {
	switch what {
	case procEventWhatNone:
		return procEventAck, 1, true
	case procEventWhatFork:
		return ProcEventFork, 4, true
	case procEventWhatExec:
		return ProcEventExec, 2, true
	case procEventWhatExit:
		return ProcEventExit, 2, true
	case procEventWhatComm:
		return procEventComm, 2, true
	}
	return 0, 0, false
}

// appendListenMessage appends the netlink message that sends op (listen or ignore) to the
// proc connector.
func appendListenMessage(b []byte, seq uint32, op uint32) []byte {
	ne := binary.NativeEndian
	const total = nlmsgHdrLen + cnMsgLen + 4
	b = ne.AppendUint32(b, total)
	b = ne.AppendUint16(b, 3) // NLMSG_DONE
	b = ne.AppendUint16(b, 0) // flags
	b = ne.AppendUint32(b, seq)
	b = ne.AppendUint32(b, 0) // port id: filled in by the kernel
	b = ne.AppendUint32(b, cnIdxProc)
	b = ne.AppendUint32(b, cnValProc)
	b = ne.AppendUint32(b, seq)
	b = ne.AppendUint32(b, seq) // ack: the kernel answers with ack+1 (it renumbers seq)
	b = ne.AppendUint16(b, 4)   // data length
	b = ne.AppendUint16(b, 0)   // flags
	return ne.AppendUint32(b, op)
}
