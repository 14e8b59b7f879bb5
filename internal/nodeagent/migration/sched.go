// Copyright 2026 The numapref Authors.
// SPDX-License-Identifier: Apache-2.0

package migration

import (
	"errors"
	"slices"
	"time"

	"github.com/numapref/numapref/internal/numa"
	"github.com/numapref/numapref/internal/numa/migrate"
)

// Request asks for the pages of a container's processes to be moved to Home from the
// nodes in From.
type Request struct {
	Key  string        // the container, as the caller names it
	PIDs []int         // its processes
	Home int           // the node to move the pages to
	From numa.NodeMask // the nodes to move them from; Home in it is ignored
}

// same reports whether r and o ask the same, as normalized.
func (r Request) same(o Request) bool {
	return r.Home == o.Home && slices.Equal(r.PIDs, o.PIDs) && slices.Equal(r.From.IDs(), o.From.IDs())
}

// normalized is r with its processes sorted once each and Home out of From.
func (r Request) normalized() Request {
	pids := slices.Clone(r.PIDs)
	slices.Sort(pids)
	from := numa.NewNodeMask()
	for _, id := range r.From.IDs() {
		if id != r.Home {
			from.Set(id)
		}
	}
	return Request{Key: r.Key, PIDs: slices.Compact(pids), Home: r.Home, From: from}
}

// Reason is why a request ended.
type Reason string

// The reasons a request ends.
const (
	ReasonMoved            Reason = "Moved"            // every page found on the source nodes moved
	ReasonPagesStayed      Reason = "PagesStayed"      // pages still did not move after the last try
	ReasonGone             Reason = "ProcessesGone"    // every process exited
	ReasonPermissionDenied Reason = "PermissionDenied" // no right to move the processes' pages
	ReasonPinned           Reason = "CpusetPinned"     // the home is outside the processes' cpuset.mems
	ReasonFailed           Reason = "Failed"           // errors in a row, Options.Attempts of them
	ReasonReplaced         Reason = "Replaced"         // a request for the key that asks otherwise came
	ReasonCancelled        Reason = "Cancelled"        // Cancel
)

// State is where a request stands.
type State string

// The states of a request.
const (
	StateQueued  State = "Queued"  // waiting for its turn or for the rate
	StateMoving  State = "Moving"  // a step of it runs
	StateWaiting State = "Waiting" // waiting to try again (Status.NextTry)
	StateEnded   State = "Ended"   // done (Status.Reason)
)

// Status is a request's progress, counted since it came.
type Status struct {
	State     State
	Reason    Reason    // when ended
	Moved     int       // pages moved
	Failed    int       // pages that did not move, counted at every pass
	Scanned   int       // addresses looked at
	LastError error     // the last error of a step, if any
	NextTry   time.Time // when waiting
}

// Options bound the worker. Rate is required; zero values of the others take the defaults
// said beside them.
type Options struct {
	Rate          float64       // pages per second
	Burst         int           // pages the bucket holds; Rate (one second of it)
	Step          int           // pages a step finds at most; 4096
	ScanCost      int           // addresses that cost as much as one page; 64
	MaxBusy       float64       // share of time spent in steps, (0, 1]; 0.25
	Backoff       time.Duration // first wait after an error, doubling; 1 s
	MaxBackoff    time.Duration // longest wait after an error; 1 min
	Attempts      int           // errors in a row that end a request; 5
	StayedBackoff time.Duration // first wait before a pass again for pages that did not move, doubling; 5 min
	StayedRetries int           // passes again for pages that did not move; 3
}

func (o Options) withDefaults() Options {
	if o.Burst <= 0 {
		o.Burst = max(1, int(o.Rate))
	}
	if o.Step <= 0 {
		o.Step = 4096
	}
	if o.ScanCost <= 0 {
		o.ScanCost = 64
	}
	if o.MaxBusy <= 0 || o.MaxBusy > 1 {
		o.MaxBusy = 0.25
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Minute
	}
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.StayedBackoff <= 0 {
		o.StayedBackoff = 5 * time.Minute
	}
	if o.StayedRetries <= 0 {
		o.StayedRetries = 3
	}
	return o
}

// job is one request and how far it is.
type job struct {
	req        Request
	gen        uint64
	pids       []int // the processes of this pass, less the gone
	next       int   // index into pids of the process being moved
	cursor     uint64
	passFailed int
	errors     int // errors in a row
	stayed     int // passes again for pages that did not move
	notBefore  time.Time
	moving     bool
	status     Status
}

// work is one step to run.
type work struct {
	key    string
	gen    uint64
	pid    int
	from   numa.NodeMask
	home   int
	cursor uint64
	budget int
}

// report is what a change of the scheduler tells Metrics.
type report struct {
	moved, failed int
	ended         []Reason
}

// sched decides the steps: which request, which process, from where, how many pages. It
// does no I/O and reads no clock; the Worker runs what it decides.
type sched struct {
	o      Options
	jobs   map[string]*job
	ring   []string // keys with work left, in turn order
	turn   int      // index into ring of the next key to try
	gen    uint64
	tokens float64
	filled time.Time // when tokens was last brought up to date
	quiet  time.Time // no step before this: the time the last step took, stretched by MaxBusy
}

func newSched(o Options, now time.Time) *sched {
	o = o.withDefaults()
	return &sched{o: o, jobs: map[string]*job{}, tokens: float64(o.Burst), filled: now}
}

func (s *sched) refill(now time.Time) {
	if d := now.Sub(s.filled); d > 0 {
		s.tokens = min(float64(s.o.Burst), s.tokens+d.Seconds()*s.o.Rate)
		s.filled = now
	}
}

// submit takes r in: a new key is queued, a key whose request asks otherwise is replaced,
// the same request again changes nothing.
func (s *sched) submit(r Request) report {
	r = r.normalized()
	var rep report
	if j, ok := s.jobs[r.Key]; ok {
		if j.req.same(r) {
			return rep
		}
		if j.status.State != StateEnded {
			rep.ended = append(rep.ended, ReasonReplaced)
		}
	}
	s.gen++
	j := &job{req: r, gen: s.gen, pids: slices.Clone(r.PIDs), status: Status{State: StateQueued}}
	s.jobs[r.Key] = j
	if !slices.Contains(s.ring, r.Key) {
		s.ring = append(s.ring, r.Key)
	}
	s.endIfNothingLeft(j, &rep)
	return rep
}

// cancel forgets key: its request ends if it had not.
func (s *sched) cancel(key string) report {
	var rep report
	j, ok := s.jobs[key]
	if !ok {
		return rep
	}
	if j.status.State != StateEnded {
		rep.ended = append(rep.ended, ReasonCancelled)
	}
	delete(s.jobs, key)
	s.dropFromRing(key)
	return rep
}

func (s *sched) dropFromRing(key string) {
	i := slices.Index(s.ring, key)
	if i < 0 {
		return
	}
	s.ring = slices.Delete(s.ring, i, i+1)
	if i < s.turn {
		s.turn--
	}
	if s.turn >= len(s.ring) {
		s.turn = 0
	}
}

// next is the step to run now, or how long to wait until one may run (0: none until a
// request comes).
func (s *sched) next(now time.Time) (work, time.Duration, bool) {
	s.refill(now)
	if now.Before(s.quiet) {
		return work{}, s.quiet.Sub(now), false
	}
	var soonest time.Duration
	for n := range len(s.ring) {
		i := (s.turn + n) % len(s.ring)
		j := s.jobs[s.ring[i]]
		if j.moving {
			continue
		}
		if wait := j.notBefore.Sub(now); wait > 0 {
			if soonest == 0 || wait < soonest {
				soonest = wait
			}
			continue
		}
		need := float64(min(s.o.Step, s.o.Burst))
		if s.tokens < need {
			return work{}, time.Duration((need - s.tokens) / s.o.Rate * float64(time.Second)), false
		}
		s.turn = (i + 1) % len(s.ring)
		j.moving = true
		j.status.State = StateMoving
		return work{
			key: j.req.Key, gen: j.gen, pid: j.pids[j.next], from: j.req.From, home: j.req.Home,
			cursor: j.cursor, budget: min(s.o.Step, int(s.tokens)),
		}, 0, true
	}
	return work{}, soonest, false
}

// finish takes in what step w did, or its error, at now; took is how long it ran.
func (s *sched) finish(w work, step migrate.Step, err error, now time.Time, took time.Duration) report {
	s.refill(now)
	s.tokens -= float64(step.Found) + float64(step.Scanned)/float64(s.o.ScanCost)
	if took > 0 {
		s.quiet = now.Add(time.Duration(float64(took) * (1/s.o.MaxBusy - 1)))
	}
	rep := report{moved: step.Moved, failed: step.Failed}
	j, ok := s.jobs[w.key]
	if !ok || j.gen != w.gen {
		return rep // replaced or cancelled meanwhile: the pages count, the job is another
	}
	j.moving = false
	j.status.State = StateQueued
	j.status.Moved += step.Moved
	j.status.Failed += step.Failed
	j.status.Scanned += step.Scanned
	j.passFailed += step.Failed
	switch {
	case err == nil:
		j.errors = 0
		j.cursor = step.Next
		if step.Done {
			j.next, j.cursor = j.next+1, 0
		}
	case numa.IsTaskGone(err):
		j.pids = slices.Delete(j.pids, j.next, j.next+1)
		j.cursor = 0
	default:
		s.failed(j, err, now, &rep)
		return rep
	}
	s.endIfNothingLeft(j, &rep)
	if j.status.State != StateEnded && j.next == len(j.pids) {
		s.passDone(j, now, &rep)
	}
	return rep
}

// failed handles a step's error that is not a gone process.
func (s *sched) failed(j *job, err error, now time.Time, rep *report) {
	j.status.LastError = err
	switch {
	case errors.Is(err, migrate.ErrPinned):
		s.end(j, ReasonPinned, rep)
	case numa.IsPermissionDenied(err):
		s.end(j, ReasonPermissionDenied, rep)
	default:
		j.errors++
		if j.errors >= s.o.Attempts {
			s.end(j, ReasonFailed, rep)
			return
		}
		s.wait(j, now.Add(min(s.o.MaxBackoff, s.o.Backoff<<(j.errors-1))))
	}
}

// passDone ends a pass over every process: the request is done, or its pages that did not
// move are tried again after a long wait, or not any more.
func (s *sched) passDone(j *job, now time.Time, rep *report) {
	if j.passFailed == 0 {
		s.end(j, ReasonMoved, rep)
		return
	}
	if j.stayed >= s.o.StayedRetries {
		s.end(j, ReasonPagesStayed, rep)
		return
	}
	j.stayed++
	j.next, j.cursor, j.passFailed = 0, 0, 0
	s.wait(j, now.Add(s.o.StayedBackoff<<(j.stayed-1)))
}

// endIfNothingLeft ends a request whose processes are all gone, or that has nothing to
// move from.
func (s *sched) endIfNothingLeft(j *job, rep *report) {
	switch {
	case len(j.pids) == 0 && len(j.req.PIDs) > 0:
		s.end(j, ReasonGone, rep)
	case len(j.pids) == 0 || len(j.req.From.IDs()) == 0:
		s.end(j, ReasonMoved, rep)
	}
}

func (s *sched) wait(j *job, until time.Time) {
	j.notBefore = until
	j.status.State, j.status.NextTry = StateWaiting, until
}

func (s *sched) end(j *job, r Reason, rep *report) {
	j.status.State, j.status.Reason, j.status.NextTry = StateEnded, r, time.Time{}
	rep.ended = append(rep.ended, r)
	s.dropFromRing(j.req.Key)
}

// status is key's progress; false for a key with no request.
func (s *sched) status(key string) (Status, bool) {
	j, ok := s.jobs[key]
	if !ok {
		return Status{}, false
	}
	return j.status, true
}
