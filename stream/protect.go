package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/internal/bin"
	"github.com/nereusstream/nereus-go/metadata"
)

// Reader protection: nothing physical is deleted while a reader may still
// use it.
//
// A reader that resolved a physical source (a WAL run, a generation object)
// from a head it read earlier may still be about to read it after GC
// unpublished that source. Protections close that window. A protection of
// stream S says "a reader may read any source of S covering offsets >=
// From, and it resolved through a head whose GenThrough was Gen":
//
//   - a WAL (generation 0) run [a, b) is needed by it iff b > max(From, Gen)
//     (below Gen the reader uses generations);
//   - a generation object [a, b) is needed by it iff b > From.
//
// Two kinds exist:
//
//   - slots: in-memory, held by reads in this process for the length of
//     one read, taken before the head is read (so a GC pass that reads the
//     protections after unpublishing a source sees every reader that could
//     have resolved it). No metadata I/O.
//   - leases: durable records (s/p/<id>/<holder>) with an expiry, for
//     readers whose sources another process collects: materialization
//     tasks, and reads of streams this process does not own. A lease is
//     written before the read it protects and renewed while it is in use.
//
// A GC pass deletes a source only when no slot and no unexpired lease needs
// it and a grace period has passed since it was unpublished (the grace
// covers clock skew and the moment between a lease's write and its
// visibility).

// protection is the part of a slot or lease the GC judges by.
type protection struct {
	From int64
	Gen  int64
}

func (p protection) needsWAL(end int64) bool { return end > max(p.From, p.Gen) }
func (p protection) needsGen(end int64) bool { return end > p.From }

// slot is one in-flight read's protection.
type slot struct {
	id ID
	protection
	prev, next *slot
}

// slotTable holds the slots of every stream, sharded to keep reads of
// different streams from contending.
type slotTable struct {
	shards [32]slotShard
}

type slotShard struct {
	mu      sync.Mutex
	streams map[ID]*slot // list head per stream (sentinel-free doubly linked)
}

func (t *slotTable) shard(id ID) *slotShard { return &t.shards[uint64(id)%uint64(len(t.shards))] }

// acquire registers a read of id from offset `from` before the head is read
// (Gen unknown: 0, the most protective value).
func (t *slotTable) acquire(id ID, from int64) *slot {
	s := &slot{id: id, protection: protection{From: from}}
	sh := t.shard(id)
	sh.mu.Lock()
	if sh.streams == nil {
		sh.streams = map[ID]*slot{}
	}
	if first := sh.streams[id]; first != nil {
		s.next = first
		first.prev = s
	}
	sh.streams[id] = s
	sh.mu.Unlock()
	return s
}

// setGen records the GenThrough of the head the read resolved through.
// Raising Gen only narrows the protection to what the read can still use.
func (t *slotTable) setGen(s *slot, gen int64) {
	sh := t.shard(s.id)
	sh.mu.Lock()
	s.Gen = max(s.Gen, gen)
	sh.mu.Unlock()
}

func (t *slotTable) release(s *slot) {
	sh := t.shard(s.id)
	sh.mu.Lock()
	if s.prev != nil {
		s.prev.next = s.next
	} else if sh.streams[s.id] == s {
		if s.next != nil {
			sh.streams[s.id] = s.next
		} else {
			delete(sh.streams, s.id)
		}
	}
	if s.next != nil {
		s.next.prev = s.prev
	}
	s.prev, s.next = nil, nil
	sh.mu.Unlock()
}

// of returns a copy of stream id's current slot protections.
func (t *slotTable) of(id ID) []protection {
	sh := t.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var out []protection
	for s := sh.streams[id]; s != nil; s = s.next {
		out = append(out, s.protection)
	}
	return out
}

// --- durable leases ---

const leaseRecordV1 = 1

type leaseRecord struct {
	protection
	Holder    string
	ExpiresMs int64
}

func (l leaseRecord) encode() []byte {
	w := bin.Writer{}
	w.U8(leaseRecordV1)
	w.String(l.Holder)
	w.Varint(l.From)
	w.Varint(l.Gen)
	w.Varint(l.ExpiresMs)
	return w.Seal()
}

func decodeLease(b []byte) (leaseRecord, error) {
	body, err := bin.Open(b)
	if err != nil {
		return leaseRecord{}, fmt.Errorf("%w: lease: %w", ErrCorrupt, err)
	}
	r := bin.Reader{B: body}
	if v := r.U8(); v != leaseRecordV1 {
		return leaseRecord{}, fmt.Errorf("%w: lease version %d", ErrCorrupt, v)
	}
	l := leaseRecord{Holder: r.String()}
	l.From, l.Gen, l.ExpiresMs = r.Varint(), r.Varint(), r.Varint()
	if err := r.Done(); err != nil {
		return leaseRecord{}, fmt.Errorf("%w: lease", ErrCorrupt)
	}
	return l, nil
}

func leaseKey(id ID, holder string) string { return protectPrefix(id) + holder }

// leaseTable is this process's durable leases: at most one per (stream,
// purpose). A lease is written (blocking) before the read it protects when
// no held lease covers it, and renewed in the background while in use.
type leaseTable struct {
	c  *Core
	mu sync.Mutex
	m  map[string]*heldLease // by key
}

type heldLease struct {
	key       string
	id        ID
	rec       leaseRecord
	version   metadata.Version
	lastUse   time.Time
	users     int // tasks holding it explicitly (materialization)
	writing   sync.Mutex
	released  bool
	everWrote bool
}

func newLeaseTable(c *Core) *leaseTable { return &leaseTable{c: c, m: map[string]*heldLease{}} }

// ensure makes sure a durable lease of holder `purpose` protects stream id
// from offset `from` with generation frontier gen, writing or lowering it
// when needed. It returns once the lease is stored.
func (t *leaseTable) ensure(ctx context.Context, id ID, purpose string, from, gen int64) (*heldLease, error) {
	holder := t.c.cfg.WriterID + "." + purpose
	key := leaseKey(id, holder)
	t.mu.Lock()
	hl := t.m[key]
	if hl == nil {
		hl = &heldLease{key: key, id: id, rec: leaseRecord{Holder: holder, protection: protection{From: from, Gen: gen}}}
		t.m[key] = hl
	}
	hl.lastUse = t.c.rt.now()
	t.mu.Unlock()

	hl.writing.Lock()
	defer hl.writing.Unlock()
	now := t.c.nowMs()
	ttl := t.c.cfg.Lifecycle.LeaseTTL.Milliseconds()
	covered := hl.everWrote && !hl.released && hl.rec.From <= from && hl.rec.Gen <= gen && hl.rec.ExpiresMs-now > ttl/2
	if covered {
		return hl, nil
	}
	next := hl.rec
	if hl.everWrote && !hl.released {
		next.From, next.Gen = min(next.From, from), min(next.Gen, gen)
	} else {
		next.From, next.Gen = from, gen
	}
	next.ExpiresMs = now + ttl
	if err := t.write(ctx, hl, next); err != nil {
		return nil, err
	}
	return hl, nil
}

// write stores rec unconditionally: the key is this process's own (writer
// ID + purpose), so no other writer contends for it, and an unknown outcome
// is settled by writing again.
func (t *leaseTable) write(ctx context.Context, hl *heldLease, rec leaseRecord) error {
	for attempt := 0; ; attempt++ {
		v, err := t.c.meta.Put(ctx, hl.key, rec.encode(), metadata.AnyVersion)
		switch metadata.Classify(err) {
		case metadata.Applied:
			hl.rec, hl.version, hl.everWrote, hl.released = rec, v, true, false
			return nil
		case metadata.Unknown:
			if attempt < 3 {
				if err := t.c.rt.sleep(ctx, unknownBackoff); err != nil {
					return err
				}
				continue
			}
			fallthrough
		default:
			return fmt.Errorf("nereus/stream: writing reader lease %s: %w", hl.key, err)
		}
	}
}

// renew refreshes leases used recently and drops idle ones. Called by the
// maintenance loop.
func (t *leaseTable) renew(ctx context.Context) {
	t.mu.Lock()
	var all []*heldLease
	for _, hl := range t.m {
		all = append(all, hl)
	}
	t.mu.Unlock()
	// In key order, so a simulated run renews in the same order every time.
	slices.SortFunc(all, func(a, b *heldLease) int { return strings.Compare(a.key, b.key) })
	now := t.c.rt.now()
	ttl := t.c.cfg.Lifecycle.LeaseTTL
	for _, hl := range all {
		t.mu.Lock()
		idle := hl.users == 0 && now.Sub(hl.lastUse) > ttl/2
		if idle {
			delete(t.m, hl.key)
		}
		t.mu.Unlock()
		hl.writing.Lock()
		switch {
		case idle && hl.everWrote && !hl.released:
			if err := t.c.meta.Delete(ctx, hl.key, hl.version); err == nil || errors.Is(err, metadata.ErrKeyNotFound) {
				hl.released = true
			}
			// Otherwise the lease simply expires.
		case !idle && hl.everWrote && hl.rec.ExpiresMs-now.UnixMilli() < ttl.Milliseconds()*2/3:
			next := hl.rec
			next.ExpiresMs = now.UnixMilli() + ttl.Milliseconds()
			if err := t.write(ctx, hl, next); err != nil && ctx.Err() == nil {
				t.c.log.Warn("renewing reader lease failed", "key", hl.key, "err", err)
			}
		}
		hl.writing.Unlock()
	}
}

// hold and unhold pin a lease for a long task (materialization) so renew
// keeps it alive however long the task takes.
func (t *leaseTable) hold(hl *heldLease) {
	t.mu.Lock()
	hl.users++
	t.mu.Unlock()
}

func (t *leaseTable) unhold(hl *heldLease) {
	t.mu.Lock()
	hl.users--
	hl.lastUse = time.Time{} // idle at once: the next renew releases it
	t.mu.Unlock()
}

// protectionsOf gathers every protection of stream id a GC decision must
// respect: this process's slots and every unexpired durable lease.
func (c *Core) protectionsOf(ctx context.Context, id ID) ([]protection, error) {
	if plantedBug == bugGCIgnoresProtections {
		return nil, nil
	}
	out := c.slots.of(id)
	recs, err := c.meta.RangeScan(ctx, protectPrefix(id), protectPrefix(id)+"\xff", 0)
	if err != nil {
		return nil, err
	}
	now := c.nowMs()
	for _, r := range recs {
		l, err := decodeLease(r.Value)
		if err != nil {
			// A lease we cannot read protects everything: never guess.
			return nil, err
		}
		if l.ExpiresMs > now-c.cfg.Lifecycle.LeaseSkew.Milliseconds() {
			out = append(out, l.protection)
		}
	}
	return out, nil
}

// protectRemoteRead takes a durable lease before a read of a stream whose
// sources another process collects (this process does not own it).
func (c *Core) protectRemoteRead(ctx context.Context, h *head, from int64) error {
	if c.cfg.Ownership == nil || c.owner(h.ID) != nil || c.cfg.Ownership.OwnsStream(h.Name) {
		return nil
	}
	_, err := c.leases.ensure(ctx, h.ID, "read", from, h.GenThrough)
	return err
}
