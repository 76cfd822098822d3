package managedledger

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
)

// Cursor tracks what a subscription has acknowledged on one ledger.
//
// Invariants: every offset < ackedBelow is acknowledged; deleted holds only
// offsets >= ackedBelow; batchAcks holds only offsets that are neither below
// ackedBelow nor in deleted, and each of its sets has at least one bit set
// (set bit = that batch index is still unacknowledged, Pulsar's ack_set
// convention).
type Cursor struct {
	l       *Ledger
	name    string
	durable bool
	key     string

	mu         sync.Mutex
	ackedBelow int64
	deleted    rangeSet
	batchAcks  map[int64][]uint64
	resetEpoch int64
	createdAt  time.Time
	gen        uint64 // bumped by every change
	persisted  uint64 // gen last applied to metadata
	version    metadata.Version

	flushMu sync.Mutex // one metadata writer at a time

	persistOK, persistFailed atomic.Int64
}

// PersistStats returns how many cursor state writes were applied to
// metadata and how many failed (conflicts that were merged and retried are
// not failures).
func (c *Cursor) PersistStats() (applied, failed int64) {
	return c.persistOK.Load(), c.persistFailed.Load()
}

type cursorRecord struct {
	AckedBelow int64               `json:"ackedBelow"`
	Deleted    [][2]int64          `json:"deleted,omitempty"`
	BatchAcks  map[string][]uint64 `json:"batchAcks,omitempty"`
	ResetEpoch int64               `json:"resetEpoch"`
	CreatedAt  time.Time           `json:"createdAt"`
}

func (l *Ledger) cursorKey(name string) string {
	return keyCursors + l.name.keyPath() + "/" + escape(name)
}

// OpenCursor opens the durable cursor name, creating it positioned at
// initial() (the first offset to deliver) if it does not exist. created
// reports whether this call created it.
func (l *Ledger) OpenCursor(ctx context.Context, name string, initial func() (int64, error)) (c *Cursor, created bool, err error) {
	if name == "" {
		return nil, false, fmt.Errorf("%w: empty subscription name", ErrInvalidName)
	}
	key := l.cursorKey(name)
	for attempt := 0; attempt < 16; attempt++ {
		var rec cursorRecord
		ver, ok, err := getRecord(ctx, l.f.meta, key, &rec)
		if err != nil {
			return nil, false, err
		}
		if ok {
			c := &Cursor{l: l, name: name, durable: true, key: key}
			c.load(rec, ver)
			return c, false, nil
		}
		start, err := initial()
		if err != nil {
			return nil, false, err
		}
		c := &Cursor{l: l, name: name, durable: true, key: key, ackedBelow: start, batchAcks: map[int64][]uint64{},
			createdAt: time.Now().UTC()}
		val, err := encodeRecord(c.recordLocked())
		if err != nil {
			return nil, false, err
		}
		v, err := l.f.meta.Put(ctx, key, val, metadata.NotExists)
		switch metadata.Classify(err) {
		case metadata.Applied:
			c.version = v
			return c, true, nil
		case metadata.Conflict, metadata.Unknown:
			continue // created concurrently (or by our lost write): load it.
		default:
			return nil, false, err
		}
	}
	return nil, false, fmt.Errorf("%w: open cursor %s", ErrTooManyConflicts, name)
}

// NonDurableCursor returns an in-memory cursor whose next offset to deliver
// is start (readers).
func (l *Ledger) NonDurableCursor(name string, start int64) *Cursor {
	return &Cursor{l: l, name: name, ackedBelow: start, batchAcks: map[int64][]uint64{}, createdAt: time.Now().UTC()}
}

// CursorExists reports whether a durable cursor exists.
func (l *Ledger) CursorExists(ctx context.Context, name string) (bool, error) {
	_, err := l.f.meta.Get(ctx, l.cursorKey(name))
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// ListCursors returns the names of the ledger's durable cursors.
func (l *Ledger) ListCursors(ctx context.Context) ([]string, error) {
	prefix := keyCursors + l.name.keyPath() + "/"
	recs, err := l.f.meta.RangeScan(ctx, prefix, prefix+"\xff", 0)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, unescape(strings.TrimPrefix(r.Key, prefix)))
	}
	return out, nil
}

// DeleteCursor removes a durable cursor's record.
func (l *Ledger) DeleteCursor(ctx context.Context, name string) error {
	err := l.f.meta.Delete(ctx, l.cursorKey(name), metadata.AnyVersion)
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return fmt.Errorf("%w: %s", ErrCursorNotFound, name)
	}
	return err
}

func (c *Cursor) load(rec cursorRecord, ver metadata.Version) {
	c.ackedBelow = rec.AckedBelow
	c.deleted = rangeSet{r: rec.Deleted}
	c.batchAcks = make(map[int64][]uint64, len(rec.BatchAcks))
	for k, v := range rec.BatchAcks {
		if off, err := strconv.ParseInt(k, 10, 64); err == nil {
			c.batchAcks[off] = v
		}
	}
	c.resetEpoch = rec.ResetEpoch
	c.createdAt = rec.CreatedAt
	c.version = ver
}

func (c *Cursor) recordLocked() cursorRecord {
	rec := cursorRecord{AckedBelow: c.ackedBelow, Deleted: append([][2]int64(nil), c.deleted.r...), ResetEpoch: c.resetEpoch, CreatedAt: c.createdAt}
	if len(c.batchAcks) > 0 {
		rec.BatchAcks = make(map[string][]uint64, len(c.batchAcks))
		for k, v := range c.batchAcks {
			rec.BatchAcks[strconv.FormatInt(k, 10)] = v
		}
	}
	return rec
}

// Name is the cursor's (subscription's) name.
func (c *Cursor) Name() string { return c.name }

// Durable reports whether the cursor is persisted.
func (c *Cursor) Durable() bool { return c.durable }

// AckedBelow is the first offset not known to be acknowledged: every offset
// below it is. The Pulsar mark-delete position is AckedBelow-1.
func (c *Cursor) AckedBelow() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ackedBelow
}

// IsAcked reports whether the whole entry at off is acknowledged.
func (c *Cursor) IsAcked(off int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return off < c.ackedBelow || c.deleted.contains(off)
}

// BatchAckSet returns a copy of the still-unacknowledged batch indexes of
// the entry at off (set bit = unacknowledged), or nil if the entry has no
// partial acknowledgement.
func (c *Cursor) BatchAckSet(off int64) []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.batchAcks[off]; ok {
		return append([]uint64(nil), s...)
	}
	return nil
}

// AckEntry acknowledges the whole entry at off.
func (c *Cursor) AckEntry(off int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ackEntryLocked(off)
}

func (c *Cursor) ackEntryLocked(off int64) {
	if off < c.ackedBelow || c.deleted.contains(off) {
		return
	}
	delete(c.batchAcks, off)
	c.deleted.add(off, off+1)
	c.normalizeLocked()
	c.gen++
}

// normalizeLocked advances ackedBelow over a deleted range that starts at
// it, keeping the invariants.
func (c *Cursor) normalizeLocked() {
	if len(c.deleted.r) > 0 && c.deleted.r[0][0] <= c.ackedBelow {
		c.ackedBelow = max(c.ackedBelow, c.deleted.r[0][1])
		c.deleted.r = c.deleted.r[1:]
	}
	for off := range c.batchAcks {
		if off < c.ackedBelow {
			delete(c.batchAcks, off)
		}
	}
}

// AckBatch acknowledges the batch indexes of the entry at off that are
// clear in unacked (set bit = still unacknowledged). When no index is left
// unacknowledged the entry is acknowledged.
func (c *Cursor) AckBatch(off int64, unacked []uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if off < c.ackedBelow || c.deleted.contains(off) {
		return
	}
	cur, ok := c.batchAcks[off]
	if !ok {
		cur = append([]uint64(nil), unacked...)
	} else {
		cur = andSets(cur, unacked)
	}
	if isEmptySet(cur) {
		c.ackEntryLocked(off)
		return
	}
	c.batchAcks[off] = cur
	c.gen++
}

// AckCumulative acknowledges every entry <= off.
func (c *Cursor) AckCumulative(off int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if off+1 <= c.ackedBelow {
		return
	}
	c.ackedBelow = off + 1
	c.deleted.trimBelow(c.ackedBelow)
	c.normalizeLocked()
	c.gen++
}

// AckCumulativeBatch acknowledges every entry < off and the batch indexes
// of off clear in unacked.
func (c *Cursor) AckCumulativeBatch(off int64, unacked []uint64) {
	if isEmptySet(unacked) {
		c.AckCumulative(off)
		return
	}
	c.AckCumulative(off - 1)
	c.AckBatch(off, unacked)
}

// Reset repositions the cursor so that off is the next entry delivered and
// forgets acknowledgements at or above it (seek). It starts a new reset
// epoch, so a concurrent older state never merges back into it.
func (c *Cursor) Reset(off int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ackedBelow = off
	c.deleted = rangeSet{}
	c.batchAcks = map[int64][]uint64{}
	c.resetEpoch++
	c.gen++
}

// Backlog is the number of unacknowledged entries below end.
func (c *Cursor) Backlog(end int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if end <= c.ackedBelow {
		return 0
	}
	n := end - c.ackedBelow
	for _, r := range c.deleted.r {
		if r[0] >= end {
			break
		}
		n -= min(r[1], end) - r[0]
	}
	return n
}

// Flush persists the cursor state as of the call. It returns nil only once
// that state (or a later one) has been applied to metadata. Concurrent
// calls coalesce into one write. Non-durable cursors return at once.
func (c *Cursor) Flush(ctx context.Context) error {
	if !c.durable {
		return nil
	}
	c.mu.Lock()
	target := c.gen
	c.mu.Unlock()
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	for attempt := 0; attempt < 32; attempt++ {
		c.mu.Lock()
		if c.persisted >= target {
			c.mu.Unlock()
			return nil
		}
		gen, ver := c.gen, c.version
		val, err := encodeRecord(c.recordLocked())
		c.mu.Unlock()
		if err != nil {
			return err
		}
		newVer, err := c.l.f.meta.Put(ctx, c.key, val, ver)
		switch metadata.Classify(err) {
		case metadata.Applied:
			c.mu.Lock()
			c.version = newVer
			c.persisted = max(c.persisted, gen)
			c.mu.Unlock()
			c.persistOK.Add(1)
			return nil
		case metadata.Conflict, metadata.Unknown:
			// Reload proof and merge; acknowledgements only grow within
			// a reset epoch, so the union is always safe to write.
			if ctx.Err() != nil {
				return fmt.Errorf("cursor %s: flush not settled: %w", c.name, ctx.Err())
			}
			if err := c.mergeStored(ctx); err != nil {
				return err
			}
		default:
			c.persistFailed.Add(1)
			return fmt.Errorf("cursor %s: flush not applied: %w", c.name, err)
		}
	}
	return fmt.Errorf("%w: cursor %s", ErrTooManyConflicts, c.name)
}

func (c *Cursor) mergeStored(ctx context.Context) error {
	var rec cursorRecord
	ver, ok, err := getRecord(ctx, c.l.f.meta, c.key, &rec)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !ok {
		// Deleted underneath us (unsubscribe elsewhere): recreate.
		c.version = metadata.NotExists
		return nil
	}
	c.version = ver
	switch {
	case rec.ResetEpoch > c.resetEpoch:
		c.load(rec, ver)
		c.persisted = c.gen
		c.gen++ // our in-flight target is superseded; make waiters settle on the next write
	case rec.ResetEpoch == c.resetEpoch:
		c.ackedBelow = max(c.ackedBelow, rec.AckedBelow)
		for _, r := range rec.Deleted {
			c.deleted.add(r[0], r[1])
		}
		c.deleted.trimBelow(c.ackedBelow)
		for k, v := range rec.BatchAcks {
			off, err := strconv.ParseInt(k, 10, 64)
			if err != nil {
				continue
			}
			if cur, ok := c.batchAcks[off]; ok {
				c.batchAcks[off] = andSets(cur, v)
			} else if !c.deleted.contains(off) {
				c.batchAcks[off] = v
			}
		}
		c.normalizeLocked()
		for off, s := range c.batchAcks {
			if c.deleted.contains(off) || isEmptySet(s) {
				delete(c.batchAcks, off)
			}
		}
	}
	return nil
}

// Snapshot describes the cursor for stats and tests.
type Snapshot struct {
	AckedBelow int64
	Deleted    [][2]int64
	BatchAcks  map[int64][]uint64
}

// Snapshot returns a copy of the state.
func (c *Cursor) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Snapshot{AckedBelow: c.ackedBelow, Deleted: c.deleted.clone().r, BatchAcks: map[int64][]uint64{}}
	for k, v := range c.batchAcks {
		s.BatchAcks[k] = append([]uint64(nil), v...)
	}
	return s
}

func andSets(a, b []uint64) []uint64 {
	out := make([]uint64, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i] & b[i]
	}
	return out
}

func isEmptySet(s []uint64) bool {
	for _, w := range s {
		if bits.OnesCount64(w) > 0 {
			return false
		}
	}
	return true
}
