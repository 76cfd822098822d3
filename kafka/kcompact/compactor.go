// Package kcompact is Kafka log compaction as a stream.Compactor: which
// records of a partition stream stay in its compacted view.
//
// It owns the Kafka semantics of compaction (last record per key,
// tombstones, transactions) and nothing else: the core reads, tiles,
// stores and publishes the view (stream/compact.go); this package never
// touches storage, metadata or offsets other than to read them from
// batches.
//
// Rules, as Kafka's log cleaner applies them:
//   - a record is kept iff it is the latest record of its key below the
//     cleaned point (the key -> latest offset map is built over the dirty
//     range; records of the already-clean view are dropped when the map has
//     a later offset for their key);
//   - a tombstone (null value) that is the latest of its key is kept for
//     delete.retention.ms after its batch was first cleaned (KIP-534): the
//     first pass that keeps it sets the batch's delete horizon (attribute
//     bit 6; the base timestamp field then holds the horizon and the
//     records' timestamp deltas are rebased, so record timestamps do not
//     change), and a later pass past the horizon drops it;
//   - records of aborted transactions are dropped; records of a
//     transaction still open at the end of the scanned range stop the pass
//     before that transaction's first batch (Kafka cleans only below the
//     last stable offset), so a pass never decides about an undecided
//     transaction;
//   - a transaction marker (control batch) stays while any data batch of
//     its transaction stays; once they are all gone, the first pass that
//     sees it so sets its delete horizon and a pass past the horizon drops
//     it (Kafka: a read_committed consumer still behind needs the marker
//     until then);
//   - records with a null key are kept (Kafka refuses them on compacted
//     topics at produce time; Nereus does not yet, and compaction cannot
//     decide for them).
//
// A pass reports the earliest delete horizon it kept (RecleanAtMs): the
// core runs a pass over the view alone then, even with no new data, as
// Kafka's cleaner picks logs whose delete horizon passed.
//
// Memory: the map holds one 16-byte key hash (MD5, as Kafka's SkimpyOffsetMap)
// and an offset per distinct key of the dirty range, plus the keys of open
// transactions; MaxKeys bounds it (about 64 bytes per key with Go's map
// overhead: 1M keys ≈ 64 MiB). When full, Scan stops and the pass cleans
// what it scanned; the next pass continues.
package kcompact

import (
	"crypto/md5"
	"fmt"

	"github.com/nereusstream/nereus-go/kafka/kbatch"
	"github.com/nereusstream/nereus-go/stream"
)

// DefaultMaxKeys bounds a pass's key map.
const DefaultMaxKeys = 1 << 20

// Options configure one pass.
type Options struct {
	// NowMs is the pass's clock (Unix ms).
	NowMs int64
	// DeleteRetentionMs is how long a tombstone stays (delete.retention.ms).
	DeleteRetentionMs int64
	// MaxKeys bounds the key map (DefaultMaxKeys if <= 0).
	MaxKeys int
	// ReplacesLog makes the view replace the lossless log below the
	// cleaned point (compact-only topics; stream.LosslessReplacer).
	ReplacesLog bool
	// LogEnd is the partition's end offset when the pass was planned: the
	// batch ending there is never compacted (0: no such rule).
	LogEnd int64
}

// attrDeleteHorizon is Kafka's DefaultRecordBatch DELETE_HORIZON_FLAG_MASK:
// the batch's base timestamp field holds its delete horizon (KIP-534).
const attrDeleteHorizon = 0x40

// deleteHorizon returns batch h's delete horizon, if it has one.
func deleteHorizon(h kbatch.Header) (int64, bool) {
	if h.Attributes&attrDeleteHorizon == 0 {
		return 0, false
	}
	return h.BaseTimestamp, true
}

type keyHash [16]byte

type txnKey struct {
	hash   keyHash
	offset int64
}

type openTxn struct {
	first int64
	keys  []txnKey
}

type abortedRange struct {
	pid         int64
	first, last int64 // data offsets [first, marker)
}

// Compactor is one pass (a stream.Compactor). Not safe for concurrent use.
type Compactor struct {
	opt     Options
	latest  map[keyHash]int64
	open    map[int64]*openTxn // producer id -> its open transaction
	pending int                // keys held in open transactions
	aborted []abortedRange
	// txnData: producers whose current transaction has a data batch kept
	// by Rewrite since their last marker (pass 2 runs in offset order).
	txnData map[int64]bool
	// reclean is the earliest delete horizon a kept batch carries.
	reclean int64
	// last is the offset of the last entry Scan accepted.
	last int64
}

var (
	_ stream.Compactor        = (*Compactor)(nil)
	_ stream.LosslessReplacer = (*Compactor)(nil)
	_ stream.Recleaner        = (*Compactor)(nil)
)

// RecleanAtMs implements stream.Recleaner: the earliest delete horizon of
// the tombstones and markers the pass kept (0: none).
func (c *Compactor) RecleanAtMs() int64 { return c.reclean }

func (c *Compactor) noteHorizon(at int64) {
	if c.reclean == 0 || at < c.reclean {
		c.reclean = at
	}
}

// horizonFor is the delete horizon a batch first cleaned now gets.
func (c *Compactor) horizonFor() int64 { return c.opt.NowMs + max(c.opt.DeleteRetentionMs, 0) }

// ReplacesLossless implements stream.LosslessReplacer.
func (c *Compactor) ReplacesLossless() bool { return c.opt.ReplacesLog }

// New starts a pass.
func New(opt Options) *Compactor {
	if opt.MaxKeys <= 0 {
		opt.MaxKeys = DefaultMaxKeys
	}
	return &Compactor{opt: opt, latest: map[keyHash]int64{}, open: map[int64]*openTxn{}, txnData: map[int64]bool{}}
}

// Keys is the number of keys in the map (for tests and stats).
func (c *Compactor) Keys() int { return len(c.latest) }

// batches calls fn for each batch in entry e's payload, with the header's
// BaseOffset set to the batch's offset in the stream: stored batches carry
// whatever base offset the producer sent (Fetch patches it), the entry's
// offset is the truth.
func batches(e stream.ReadEntry, fn func(b []byte, h kbatch.Header) error) error {
	p, base := e.Payload, e.Offset
	for len(p) > 0 {
		h, err := kbatch.ParseHeader(p)
		if err != nil {
			return err
		}
		n := h.TotalSize()
		if n < kbatch.HeaderSize || n > len(p) || h.Magic != 2 {
			return fmt.Errorf("%w: batch framing in a stored entry", kbatch.ErrCorrupt)
		}
		h.BaseOffset = base
		if err := fn(p[:n], h); err != nil {
			return err
		}
		p = p[n:]
		base += int64(h.LastOffsetDelta) + 1
	}
	return nil
}

// Scan implements stream.Compactor (pass 1).
func (c *Compactor) Scan(e stream.ReadEntry) (bool, error) {
	type upd struct {
		h   keyHash
		off int64
	}
	var ups []upd
	var txnUps []struct {
		pid int64
		k   txnKey
	}
	type marker struct {
		pid    int64
		commit bool
		at     int64
	}
	var markers []marker
	firstOf := map[int64]int64{}
	err := batches(e, func(b []byte, h kbatch.Header) error {
		if h.Attributes&kbatch.AttrControl != 0 {
			typ, err := kbatch.ControlType(b)
			if err != nil {
				return err
			}
			markers = append(markers, marker{pid: h.ProducerID, commit: typ == kbatch.ControlCommit, at: h.BaseOffset})
			return nil
		}
		recs, err := records(b, h)
		if err != nil {
			return err
		}
		txn := h.Attributes&kbatch.AttrTransactional != 0
		if txn {
			if _, ok := firstOf[h.ProducerID]; !ok {
				firstOf[h.ProducerID] = h.BaseOffset
			}
		}
		for _, r := range recs {
			if r.keyNull {
				continue
			}
			k := txnKey{hash: md5.Sum(r.key), offset: r.offset}
			if txn {
				txnUps = append(txnUps, struct {
					pid int64
					k   txnKey
				}{h.ProducerID, k})
			} else {
				ups = append(ups, upd{k.hash, k.offset})
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	// The bound: stop before this entry if its keys might not fit (counted
	// as if all were new; a map that is empty always takes one entry).
	if n := len(c.latest) + c.pending; n > 0 && n+len(ups)+len(txnUps) > c.opt.MaxKeys {
		return false, nil
	}
	for _, u := range ups {
		c.latest[u.h] = u.off
	}
	for pid, first := range firstOf {
		if _, ok := c.open[pid]; !ok {
			c.open[pid] = &openTxn{first: first}
		}
	}
	for _, t := range txnUps {
		o := c.open[t.pid]
		o.keys = append(o.keys, t.k)
		c.pending++
	}
	c.last = e.Offset
	for _, m := range markers {
		o, ok := c.open[m.pid]
		if !ok {
			continue // its data is before the range (or it had none)
		}
		if m.commit {
			for _, k := range o.keys {
				c.latest[k.hash] = k.offset
			}
		} else {
			c.aborted = append(c.aborted, abortedRange{pid: m.pid, first: o.first, last: m.at})
		}
		c.pending -= len(o.keys)
		delete(c.open, m.pid)
	}
	return true, nil
}

// SafeEnd implements stream.Compactor: never past the first batch of a
// transaction still open (Kafka's last stable offset), and never the
// partition's last batch: Kafka never cleans the active segment, which
// always holds the last batch, so a consumer's position can always reach
// the end through a batch (a compacted tail of gaps only would leave it
// fetching nothing below the end).
func (c *Compactor) SafeEnd(scanned int64) int64 {
	end := scanned
	if c.opt.LogEnd > 0 && scanned >= c.opt.LogEnd {
		end = min(end, c.last)
	}
	for _, o := range c.open {
		end = min(end, o.first)
	}
	return end
}

func (c *Compactor) abortedAt(pid, off int64) bool {
	for _, a := range c.aborted {
		if a.pid == pid && off >= a.first && off < a.last {
			return true
		}
	}
	return false
}

// Rewrite implements stream.Compactor (pass 2).
func (c *Compactor) Rewrite(e stream.ReadEntry, dirty bool) ([]byte, error) {
	var out []byte
	changed := false
	err := batches(e, func(b []byte, h kbatch.Header) error {
		if h.Attributes&kbatch.AttrControl != 0 {
			nb, err := c.rewriteMarker(b, h)
			if err != nil {
				return err
			}
			if len(nb) != len(b) || len(nb) > 0 && &nb[0] != &b[0] {
				changed = true
			}
			out = append(out, nb...)
			return nil
		}
		txn := h.Attributes&kbatch.AttrTransactional != 0
		if dirty && txn && c.abortedAt(h.ProducerID, h.BaseOffset) {
			changed = true
			return nil
		}
		recs, err := records(b, h)
		if err != nil {
			return err
		}
		horizon, hasHorizon := deleteHorizon(h)
		expired := hasHorizon && c.opt.NowMs >= horizon
		kept := recs[:0:0]
		tombstones := 0
		for _, r := range recs {
			if !r.keyNull {
				if l, ok := c.latest[md5.Sum(r.key)]; ok && l > r.offset {
					continue
				}
				if r.tombstone {
					if expired {
						continue
					}
					tombstones++
				}
			}
			kept = append(kept, r)
		}
		if txn && len(kept) > 0 {
			c.txnData[h.ProducerID] = true
		}
		setHorizon := tombstones > 0 && !hasHorizon
		switch {
		case len(kept) == 0:
			changed = true
		case len(kept) == len(recs) && !setHorizon:
			out = append(out, b...)
		default:
			base := int64(-1)
			if setHorizon {
				horizon, base = c.horizonFor(), c.horizonFor()
			}
			nb, err := rebuild(b, h, kept, base)
			if err != nil {
				return err
			}
			out = append(out, nb...)
			changed = true
		}
		if tombstones > 0 {
			c.noteHorizon(horizon)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !changed {
		return e.Payload, nil
	}
	return out, nil
}

// rewriteMarker decides control batch b (header h): kept as it is while
// its transaction has data kept; once that is gone, given a delete horizon
// on the first such pass and dropped (nil) on the first pass past it.
func (c *Compactor) rewriteMarker(b []byte, h kbatch.Header) ([]byte, error) {
	hasData := c.txnData[h.ProducerID]
	delete(c.txnData, h.ProducerID)
	if hasData {
		return b, nil
	}
	if at, ok := deleteHorizon(h); ok {
		if c.opt.NowMs >= at {
			return nil, nil
		}
		c.noteHorizon(at)
		return b, nil
	}
	recs, err := records(b, h)
	if err != nil {
		return nil, err
	}
	at := c.horizonFor()
	c.noteHorizon(at)
	return rebuild(b, h, recs, at)
}
