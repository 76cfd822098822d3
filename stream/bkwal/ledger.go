package bkwal

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/bookkeeper/proto"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// ledger is a ledger this incarnation created and writes (or wrote).
type ledger struct {
	id                   int64
	stream, epoch, token uint64
	w                    LedgerWriter
	created              time.Time
	createdMs            int64

	mu         sync.Mutex
	recVersion metadata.Version
	entries    int64 // entries sent
	bytes      int64
	tainted    string
	sealing    bool
	sealed     bool
	sealOK     bool // the seal settled the ledger's end (closed by us or by a recovery)
	lastEntry  int64
	mdVersion  bookkeeper.Version
	lastRun    time.Time // when the last run was started (created, before any)
	inflight   int       // runs sent, not yet completed
	written    int       // runs reported durable
	releasedN  int
	committed  bool
	finalizing bool
	// ends maps durable runs' commit numbers to their end offsets until
	// released; committedEnd is the highest end of a committed one.
	ends         map[uint64]int64
	committedEnd int64
	// firstEnd is the end offset of the first committed run released into
	// this ledger (hasFirst once one was): when the core judges it
	// retired, the ledger holds offsets nobody needs, and rollDue asks the
	// lane to start a new ledger at the next run (retire.go).
	firstEnd int64
	hasFirst bool
	rollDue  bool
}

func (led *ledger) runStarted(entries, bytes int64, now time.Time) {
	led.mu.Lock()
	defer led.mu.Unlock()
	led.lastRun = now
	led.entries += entries
	led.bytes += bytes
	led.inflight++
}

func (led *ledger) runFinished(durable bool, commit uint64, end int64) {
	led.mu.Lock()
	defer led.mu.Unlock()
	led.inflight--
	if durable {
		led.written++
		if led.ends == nil {
			led.ends = map[uint64]int64{}
		}
		led.ends[commit] = end
	}
}

func (led *ledger) released(commit uint64, committed bool) {
	led.mu.Lock()
	defer led.mu.Unlock()
	led.releasedN++
	led.committed = led.committed || committed
	if committed {
		end := led.ends[commit]
		led.committedEnd = max(led.committedEnd, end)
		if !led.hasFirst || end < led.firstEnd {
			led.firstEnd, led.hasFirst = end, true
		}
	}
	delete(led.ends, commit)
}

func (led *ledger) size() (int64, int64) {
	led.mu.Lock()
	defer led.mu.Unlock()
	return led.entries, led.bytes
}

// taint marks the ledger's tail as never to be reused; it reports whether
// this call tainted it (the first reason wins).
func (led *ledger) taint(reason string) bool {
	led.mu.Lock()
	defer led.mu.Unlock()
	if led.tainted == "" {
		led.tainted = reason
		return true
	}
	return false
}

func (led *ledger) isTainted() bool {
	led.mu.Lock()
	defer led.mu.Unlock()
	return led.tainted != ""
}

// putSettled is a conditional put whose unknown outcome is settled by
// re-reading (the value, if stored, is ours).
func (p *Provider) putSettled(ctx context.Context, key string, value []byte, expected metadata.Version) (metadata.Version, error) {
	for {
		v, err := p.cfg.Meta.Put(ctx, key, value, expected)
		switch metadata.Classify(err) {
		case metadata.Applied:
			return v, nil
		case metadata.Unknown:
			rec, gerr := p.cfg.Meta.Get(ctx, key)
			switch {
			case gerr == nil && bytes.Equal(rec.Value, value) && rec.Version != expected:
				return rec.Version, nil
			case gerr == nil && rec.Version == expected, errors.Is(gerr, metadata.ErrKeyNotFound) && expected == metadata.NotExists:
				continue // not applied: retry
			case gerr == nil, errors.Is(gerr, metadata.ErrKeyNotFound):
				return 0, fmt.Errorf("%w: %s moved", metadata.ErrUnexpectedVersion, key)
			}
			if ctx.Err() != nil {
				return 0, fmt.Errorf("%s: %w", key, err)
			}
			_ = p.rt.Sleep(ctx, 20*time.Millisecond) // the store did not answer; retry with the context's deadline
		default:
			return 0, err
		}
	}
}

// deleteSettled deletes a key (any version), treating an absent key as done.
func (p *Provider) deleteSettled(ctx context.Context, key string) error {
	for {
		err := p.cfg.Meta.Delete(ctx, key, metadata.AnyVersion)
		if err == nil || errors.Is(err, metadata.ErrKeyNotFound) {
			return nil
		}
		if metadata.Classify(err) != metadata.Unknown || ctx.Err() != nil {
			return err
		}
	}
}

// openLedger creates the ledger for (stream, session): allocate an ID,
// record it (ALLOCATED), create it (metadata first, BookKeeper's rule),
// take over the stream pointer (fencing the previous session's ledger),
// and mark it OPEN. Any failure burns the ID; the record left behind is
// cleaned up by Recover.
func (p *Provider) openLedger(ctx context.Context, stream, epoch, token uint64) (*ledger, error) {
	led, err := p.createLedger(ctx, stream, epoch, token)
	if err != nil {
		p.met.ledgersFailed.Add(bg, 1)
		return nil, err
	}
	p.met.ledgersOpened.Add(bg, 1)
	return led, nil
}

func (p *Provider) createLedger(ctx context.Context, stream, epoch, token uint64) (*ledger, error) {
	id, err := p.cfg.Ledgers.Allocate(ctx)
	if err != nil {
		return nil, fmt.Errorf("nereus/bkwal: allocating a ledger ID: %w", err)
	}
	now := p.cfg.Now()
	rec := ledgerRecord{ledger: id, stream: stream, epoch: epoch, token: token, state: stateAllocated,
		lastEntry: -1, incarnation: p.incarnation, createdMs: now.UnixMilli()}
	key := p.recordKey(id)
	rv, err := p.putSettled(ctx, key, rec.encode(), metadata.NotExists)
	if err != nil {
		return nil, fmt.Errorf("nereus/bkwal: recording ledger %d: %w", id, err)
	}
	w, err := p.cfg.Ledgers.CreateLedger(ctx, bookkeeper.CreateOptions{
		LedgerID: id, EnsembleSize: p.cfg.EnsembleSize, WriteQuorum: p.cfg.WriteQuorum, AckQuorum: p.cfg.AckQuorum,
		DigestType: proto.DigestCRC32C, Password: p.cfg.Password, Custom: ledgerTags(stream, epoch, token),
	})
	if err != nil {
		if errors.Is(err, bookkeeper.ErrLedgerExists) {
			// Someone else's ledger: never ours, never to be recovered.
			_ = p.deleteSettled(ctx, key)
		}
		// Otherwise (unknown create, no bookies, proof) the record stays
		// ALLOCATED: Recover checks whether the ledger exists.
		return nil, fmt.Errorf("nereus/bkwal: creating ledger %d: %w", id, err)
	}
	led := &ledger{id: id, stream: stream, epoch: epoch, token: token, w: w, created: now, createdMs: rec.createdMs,
		recVersion: rv, lastEntry: -1, lastRun: now}
	p.mu.Lock()
	p.ledgers[id] = led
	p.mu.Unlock()
	if err := p.takePointer(ctx, stream, epoch, token, id); err != nil {
		if led.taint("stream pointer: " + err.Error()) {
			p.met.tainted("stream_pointer")
		}
		p.seal(led)
		return nil, err
	}
	rec.state = stateOpen
	if v, err := p.putSettled(ctx, key, rec.encode(), rv); err == nil {
		led.mu.Lock()
		led.recVersion = v
		led.mu.Unlock()
	} else {
		p.log.Warn("bkwal: marking ledger OPEN failed (Recover treats it as open)", "ledger", id, "err", err)
	}
	return led, nil
}

// takePointer points the stream at ledger id of (epoch, token). A pointer
// to an older session's ledger that this incarnation does not own is
// recovery-opened first: that fences the previous owner at the bookies and
// closes its ledger at exactly its acknowledged entries. A pointer of a
// newer session means ours is stale.
func (p *Provider) takePointer(ctx context.Context, stream, epoch, token uint64, id int64) error {
	key := p.pointerKey(stream)
	want := streamPointer{ledger: id, epoch: epoch, token: token, writer: p.cfg.WriterID}.encode()
	for attempt := 0; attempt < 16; attempt++ {
		expected := metadata.NotExists
		rec, err := p.cfg.Meta.Get(ctx, key)
		switch {
		case err == nil:
			cur, derr := decodeStreamPointer(rec.Value)
			if derr != nil {
				return fmt.Errorf("nereus/bkwal: stream pointer %s: %w", key, derr)
			}
			if cur.epoch > epoch || (cur.epoch == epoch && cur.token != token) {
				return fmt.Errorf("%w: stream %016x is written by session epoch %d", ErrStaleSession, stream, cur.epoch)
			}
			if cur.ledger != id {
				p.mu.Lock()
				_, mine := p.ledgers[cur.ledger]
				p.mu.Unlock()
				if !mine {
					p.fenceForeign(ctx, cur)
				}
			}
			expected = rec.Version
		case !errors.Is(err, metadata.ErrKeyNotFound):
			return fmt.Errorf("nereus/bkwal: reading stream pointer: %w", err)
		}
		_, err = p.putSettled(ctx, key, want, expected)
		if err == nil {
			return nil
		}
		if !errors.Is(err, metadata.ErrUnexpectedVersion) {
			return fmt.Errorf("nereus/bkwal: stream pointer: %w", err)
		}
	}
	return fmt.Errorf("nereus/bkwal: stream pointer %s keeps moving", key)
}

// fenceForeign recovery-opens the previous session's ledger. Best effort:
// the head CAS already keeps the old session from committing; this closes
// the ledger for readers and fences the old writer at the bookies.
func (p *Provider) fenceForeign(ctx context.Context, cur streamPointer) {
	r, err := p.cfg.Ledgers.RecoverLedger(ctx, cur.ledger, bookkeeper.OpenOptions{Password: p.cfg.Password})
	switch {
	case err == nil:
		p.log.Info("bkwal: recovered the previous session's ledger", "ledger", cur.ledger, "epoch", cur.epoch,
			"writer", cur.writer, "lastEntry", r.LastAddConfirmed())
	case errors.Is(err, bookkeeper.ErrNoSuchLedger):
	default:
		p.log.Warn("bkwal: could not recover the previous session's ledger (its owner's Recover will)", "ledger", cur.ledger, "err", err)
	}
}

// seal closes a ledger (asynchronously, once): pending adds complete or
// fail first, then the ledger is CLOSED at its LAC and its record SEALED.
func (p *Provider) seal(led *ledger) {
	led.mu.Lock()
	if led.sealing {
		led.mu.Unlock()
		return
	}
	led.sealing = true
	if led.tainted == "" {
		led.tainted = "sealed"
	}
	led.mu.Unlock()
	p.spawn(func() {
		ctx, cancel := p.rt.WithTimeout(context.Background(), p.cfg.OpTimeout)
		defer cancel()
		res, err := led.w.Close(ctx)
		switch {
		case err == nil, errors.Is(err, bookkeeper.ErrFenced) && res.Version != 0:
			// Closed by us, or by a recovery that already decided the end.
		default:
			p.log.Warn("bkwal: sealing ledger failed; left to Recover", "ledger", led.id, "err", err)
			led.mu.Lock()
			led.sealed = true
			led.mu.Unlock()
			return
		}
		led.mu.Lock()
		led.lastEntry, led.mdVersion = res.LastEntryID, res.Version
		rec := ledgerRecord{ledger: led.id, stream: led.stream, epoch: led.epoch, token: led.token, state: stateSealed,
			lastEntry: res.LastEntryID, incarnation: p.incarnation, createdMs: led.createdMs}
		rv := led.recVersion
		led.mu.Unlock()
		v, perr := p.putSettled(ctx, p.recordKey(led.id), rec.encode(), rv)
		led.mu.Lock()
		if perr == nil {
			led.recVersion = v
		}
		led.sealed, led.sealOK = true, perr == nil
		led.mu.Unlock()
		p.maybeFinalize(led)
	})
}

// maybeFinalize settles a sealed ledger once every run this incarnation
// wrote to it completed and was released by the core: keep it (SETTLED) if
// a run was committed, delete it otherwise. A ledger with a run the core
// never released stays for the next incarnation's Recover.
func (p *Provider) maybeFinalize(led *ledger) {
	led.mu.Lock()
	ready := led.sealed && led.sealOK && led.inflight == 0 && (led.releasedN >= led.written || PlantedBug == BugFinalizeBeforeRelease) && !led.finalizing
	if ready {
		led.finalizing = true
	}
	committed := led.committed
	rec := ledgerRecord{ledger: led.id, stream: led.stream, epoch: led.epoch, token: led.token, state: stateSettled,
		lastEntry: led.lastEntry, incarnation: p.incarnation, createdMs: led.createdMs, committed: true,
		committedEnd: led.committedEnd}
	rv, mdv := led.recVersion, led.mdVersion
	led.mu.Unlock()
	if !ready {
		return
	}
	p.spawn(func() {
		ctx, cancel := p.rt.WithTimeout(context.Background(), p.cfg.OpTimeout)
		defer cancel()
		var err error
		if committed {
			_, err = p.putSettled(ctx, p.recordKey(led.id), rec.encode(), rv)
		} else {
			err = p.deleteLedger(ctx, led.id, mdv)
		}
		if err != nil {
			p.log.Warn("bkwal: finalizing ledger failed; left to Recover", "ledger", led.id, "err", err)
			return
		}
		p.met.ledgersFinal.Add(bg, 1)
		if !committed {
			p.met.ledgersDelete.Add(bg, 1)
		}
		p.mu.Lock()
		delete(p.ledgers, led.id)
		p.mu.Unlock()
		p.readers.drop(led.id)
	})
}

// deleteLedger physically deletes a ledger none of whose runs was
// committed (through the namespace: proof and owner tag re-checked), then
// its record.
func (p *Provider) deleteLedger(ctx context.Context, id int64, version bookkeeper.Version) error {
	err := p.cfg.Ledgers.DeleteLedger(ctx, id, version)
	if err != nil && !errors.Is(err, bookkeeper.ErrNoSuchLedger) {
		return err
	}
	return p.deleteSettled(ctx, p.recordKey(id))
}

// --- readers ---

type readerCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // front = most recent; values are int64 ledger IDs
	m     map[int64]*readerEntry
}

type readerEntry struct {
	r   LedgerReader
	elt *list.Element
}

func newReaderCache(max int) *readerCache {
	return &readerCache{max: max, order: list.New(), m: map[int64]*readerEntry{}}
}

func (c *readerCache) get(id int64) LedgerReader {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[id]
	if e == nil {
		return nil
	}
	c.order.MoveToFront(e.elt)
	return e.r
}

func (c *readerCache) put(id int64, r LedgerReader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[id]; e != nil {
		c.order.MoveToFront(e.elt)
		return
	}
	c.m[id] = &readerEntry{r: r, elt: c.order.PushFront(id)}
	for c.order.Len() > c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.m, old.Value.(int64))
	}
}

func (c *readerCache) drop(id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[id]; e != nil {
		c.order.Remove(e.elt)
		delete(c.m, id)
	}
}

func (c *readerCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = map[int64]*readerEntry{}
	c.order.Init()
}

// reader returns a non-recovery reader of a ledger (never fences).
func (p *Provider) reader(ctx context.Context, id int64) (LedgerReader, error) {
	if r := p.readers.get(id); r != nil {
		return r, nil
	}
	r, err := p.cfg.Ledgers.OpenLedger(ctx, id, bookkeeper.OpenOptions{Password: p.cfg.Password})
	if errors.Is(err, bookkeeper.ErrNoSuchLedger) {
		return nil, fmt.Errorf("%w: ledger %d: %w", provider.ErrNotFound, id, err)
	}
	if err != nil {
		return nil, err
	}
	p.readers.put(id, r)
	return r, nil
}
