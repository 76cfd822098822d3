// Package acklog is the ledger crash tests check a server against: every
// write the server acknowledged, with the position it was acknowledged at,
// recorded as the acknowledgement arrives, and a verifier for what reads
// back afterwards. It owns the bookkeeping and the verdict, nothing else: it
// never talks to a server.
//
// What Verify proves, per partition (a stream, a Kafka partition, a Pulsar
// topic):
//   - every acknowledged payload reads back exactly at its acknowledged
//     position (nothing acknowledged is lost or moved);
//   - no payload reads back twice (exactly once, acknowledged or not: a
//     write whose acknowledgement was lost in a crash may be there once);
//   - positions read back are strictly increasing;
//   - per writer key, sequence numbers read back in increasing order (order
//     per producer / per key).
//
// Ack itself rejects a position acknowledged twice (a server must never
// hand one position to two writes, nor acknowledge one write at two
// positions), so a doubly acknowledged offset fails the test the moment it
// happens, not only if the read-back shows it.
//
// Crash tests also use it to kill at the right moment: Begin/End count
// writes in flight, and WaitKillPoint waits until a cycle made its minimum
// progress and a write is in flight, so the kill lands mid-write instead of
// after a fixed sleep or on an idle server.
//
// Tests only.
package acklog

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Pos is a position in a partition: an offset, plus an index inside the
// entry at that offset for protocols that acknowledge several messages per
// entry (a Pulsar batch index; 0 elsewhere). Positions order by offset, then
// index.
type Pos struct {
	Offset int64
	Index  int32
}

// Less orders positions.
func (p Pos) Less(q Pos) bool {
	return p.Offset < q.Offset || (p.Offset == q.Offset && p.Index < q.Index)
}

func (p Pos) String() string {
	if p.Index == 0 {
		return strconv.FormatInt(p.Offset, 10)
	}
	return fmt.Sprintf("%d:%d", p.Offset, p.Index)
}

// Payload formats the payload of write seq of writer key: "key#seq". Verify
// checks order per key on payloads of that form (others are checked for
// exactly-once and position only). key must not contain '#'.
func Payload(key string, seq int) string { return key + "#" + strconv.Itoa(seq) }

// parsePayload splits a Payload-formatted string.
func parsePayload(p string) (key string, seq int, ok bool) {
	i := strings.LastIndexByte(p, '#')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(p[i+1:])
	return p[:i], n, err == nil
}

// Log is the ledger. Its methods are safe for concurrent use.
type Log struct {
	mu       sync.Mutex
	parts    map[string]map[Pos]string // partition -> position -> payload
	where    map[string]map[string]Pos // partition -> payload -> position
	unplaced map[string]map[string]bool
	n        int
	inFlight int
}

// New returns an empty ledger.
func New() *Log {
	return &Log{parts: map[string]map[Pos]string{}, where: map[string]map[string]Pos{}, unplaced: map[string]map[string]bool{}}
}

// Ack records that payload was acknowledged at pos of partition. It returns
// an error — the test must fail — when pos was already acknowledged (for
// any payload) or payload was already acknowledged at another position.
func (l *Log) Ack(partition string, pos Pos, payload string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	byPos, byPayload := l.parts[partition], l.where[partition]
	if byPos == nil {
		byPos, byPayload = map[Pos]string{}, map[string]Pos{}
		l.parts[partition], l.where[partition] = byPos, byPayload
	}
	if prev, ok := byPos[pos]; ok {
		return fmt.Errorf("acklog: %s position %v acknowledged twice: for %q and for %q", partition, pos, prev, payload)
	}
	if prev, ok := byPayload[payload]; ok {
		return fmt.Errorf("acklog: %s payload %q acknowledged twice: at %v and at %v", partition, payload, prev, pos)
	}
	if l.unplaced[partition][payload] {
		return fmt.Errorf("acklog: %s payload %q acknowledged as a duplicate and again at %v", partition, payload, pos)
	}
	byPos[pos], byPayload[payload] = payload, pos
	l.n++
	return nil
}

// AckUnplaced records that payload was acknowledged without a position: a
// server that recognised a resend as a duplicate of a write it stored
// earlier and no longer knows where (Pulsar answers such a duplicate with
// message id -1:-1, as Apache Pulsar does). Verify requires it to read back
// exactly once, anywhere.
func (l *Log) AckUnplaced(partition, payload string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if pos, ok := l.where[partition][payload]; ok {
		return fmt.Errorf("acklog: %s payload %q acknowledged at %v and again as a duplicate", partition, payload, pos)
	}
	if l.unplaced[partition] == nil {
		l.unplaced[partition] = map[string]bool{}
	}
	if !l.unplaced[partition][payload] {
		l.unplaced[partition][payload] = true
		l.n++
	}
	return nil
}

// Count is the number of acknowledged writes.
func (l *Log) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// Begin marks a write as in flight; call End when its outcome (any) is
// known.
func (l *Log) Begin() {
	l.mu.Lock()
	l.inFlight++
	l.mu.Unlock()
}

// End marks a write begun with Begin as finished.
func (l *Log) End() {
	l.mu.Lock()
	l.inFlight--
	l.mu.Unlock()
}

// WaitKillPoint waits until at least minProgress writes were acknowledged
// since the count was since, and a write is in flight at that moment. It
// fails (returns an error naming the shortfall) when ctx ends first: a
// cycle that made no progress must fail the test, never pass it silently.
// stop, if non-nil, is polled too (a writer that failed fatally).
func (l *Log) WaitKillPoint(ctx context.Context, since, minProgress int, stop func() error) error {
	for {
		l.mu.Lock()
		n, busy := l.n, l.inFlight > 0
		l.mu.Unlock()
		if n-since >= minProgress && busy {
			return nil
		}
		if stop != nil {
			if err := stop(); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("acklog: %d of the required %d writes acknowledged in this cycle (in flight now: %v): %w",
				n-since, minProgress, busy, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// Entry is one record read back.
type Entry struct {
	Pos     Pos
	Payload string
}

// Verify checks what partition reads back (entries in read order) against
// the acknowledged writes; see the package doc for what it proves. It
// returns every kind of violation it finds, up to a few of each.
func (l *Log) Verify(partition string, read []Entry) error {
	l.mu.Lock()
	acked := l.parts[partition]
	unplaced := l.unplaced[partition]
	l.mu.Unlock()
	var errs []string
	report := func(format string, args ...any) {
		if len(errs) < 20 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	got := make(map[Pos]string, len(read))
	seen := make(map[string]Pos, len(read))
	lastSeq := map[string]int{}
	for i, e := range read {
		if i > 0 && !read[i-1].Pos.Less(e.Pos) {
			report("position %v read after %v (not increasing)", e.Pos, read[i-1].Pos)
		}
		if prev, dup := seen[e.Payload]; dup {
			report("payload %q read twice, at %v and %v", e.Payload, prev, e.Pos)
		}
		seen[e.Payload] = e.Pos
		got[e.Pos] = e.Payload
		if key, seq, ok := parsePayload(e.Payload); ok {
			if prev, ok := lastSeq[key]; ok && seq <= prev {
				report("writer %q: sequence %d read after %d (at %v): reordered", key, seq, prev, e.Pos)
			}
			lastSeq[key] = seq
		}
	}
	lost := 0
	positions := make([]Pos, 0, len(acked))
	for p := range acked {
		positions = append(positions, p)
	}
	sort.Slice(positions, func(i, j int) bool { return positions[i].Less(positions[j]) })
	for _, p := range positions {
		want := acked[p]
		if g, ok := got[p]; !ok || g != want {
			lost++
			if at, moved := seen[want]; moved {
				report("acknowledged %q at %v reads back at %v", want, p, at)
			} else {
				report("acknowledged %q at %v is lost (position holds %q, present=%v)", want, p, g, ok)
			}
		}
	}
	for payload := range unplaced {
		if _, ok := seen[payload]; !ok {
			lost++
			report("acknowledged (as a duplicate) %q is lost", payload)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("acklog: %s: %d of %d acknowledged writes lost or moved; %d records read back:\n  %s",
		partition, lost, len(acked)+len(unplaced), len(read), strings.Join(errs, "\n  "))
}

// Partitions lists the partitions with acknowledged writes.
func (l *Log) Partitions() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.parts))
	for p := range l.parts {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Acked returns the number of acknowledged writes of partition.
func (l *Log) Acked(partition string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.parts[partition]) + len(l.unplaced[partition])
}
