package stream

import "time"

// What the GC pass remembers per stream, so that a quiet stream's pass
// costs no metadata operations (a pass used to range-scan the index,
// generation records, retire journal and leases of every owned stream
// every GCInterval, whatever the traffic).
//
// The memo only ever skips a scan that the last pass already did with the
// same inputs and found nothing left to do: skipping can delay a deletion,
// never cause one (every deletion still follows from a fresh scan and the
// proofs of gc.go). What the memo cannot see — a record another process
// wrote below a frontier this process already swept, a write whose
// outcome was unknown and that landed later — is caught by the full pass
// each stream gets every gcFullEvery (spread over the passes by stream ID),
// by the first pass after a stream is (re)acquired (no memo) and by every
// pass in a dry run (which must keep reporting).

const (
	// gcFullEvery is how often each stream gets a pass that skips nothing.
	gcFullEvery = 30 * time.Second
	// gcLeaseEvery is how often a stream's lease records are scanned for
	// expired ones (they hold nothing back once expired: housekeeping).
	gcLeaseEvery = 10 * time.Second
)

// gcMemo is what the last passes found for one stream.
type gcMemo struct {
	seen int // the last pass that visited the stream

	// indexOK: the index records at or below indexFrontier are gone.
	indexOK       bool
	indexFrontier int64
	// genOK: the generation records below genBound's key are retired.
	genOK    bool
	genBound int64
	// journalEmpty: the last drain found no journal entry and none was
	// written since (journalTouch counts writes, see gcTouchJournal).
	journalEmpty bool
	journalTouch uint64
	// mergesQuiet: the last considerMerges scanned the whole generation
	// index above the merge cursor at mergeKey and found nothing
	// superseded and no window due; this process's merge tasks of the
	// stream clear it when they end (gcMergeTaskEnded).
	mergesQuiet bool
	mergeKey    mergeInputs
}

// mergeInputs are what a merge decision depends on besides the generation
// records: new indexed generations, a trim, the cursor.
type mergeInputs struct{ start, genIndexed, cursor int64 }

// everyPasses is how many GC passes make d (at least 1).
func (c *Core) everyPasses(d time.Duration) int {
	return max(1, int(d/max(c.cfg.Lifecycle.GCInterval, time.Millisecond)))
}

// gcDue reports whether stream id's turn in a cycle of n passes is passN,
// spreading the streams over the cycle.
func gcDue(id ID, passN, n int) bool {
	return (uint64(passN)+uint64(id)*0x9e3779b97f4a7c15>>32)%uint64(n) == 0
}

// gcMemoOf returns (creating) stream id's memo and marks it seen by passN.
// It reports whether the memo existed. Callers hold c.gc.mu.
func (c *Core) gcMemoOf(id ID, passN int) (*gcMemo, bool) {
	if c.gc.memo == nil {
		c.gc.memo = map[ID]*gcMemo{}
	}
	m, ok := c.gc.memo[id]
	if !ok {
		m = &gcMemo{}
		c.gc.memo[id] = m
	}
	m.seen = max(m.seen, passN)
	return m, ok
}

// gcFullFor reports whether stream id's pass passN skips nothing.
func (c *Core) gcFullFor(id ID, passN int) bool {
	c.gc.mu.Lock()
	_, known := c.gcMemoOf(id, passN)
	c.gc.mu.Unlock()
	return c.cfg.Lifecycle.GCDryRun || !known || gcDue(id, passN, c.everyPasses(gcFullEvery))
}

// gcIndexSwept reports whether the index records at or below frontier are
// known gone; gcNoteIndexSwept records that they are.
func (c *Core) gcIndexSwept(id ID, frontier int64) bool {
	c.gc.mu.Lock()
	defer c.gc.mu.Unlock()
	m := c.gc.memo[id]
	return m != nil && m.indexOK && m.indexFrontier == frontier
}

func (c *Core) gcNoteIndexSwept(id ID, frontier int64) {
	c.gc.mu.Lock()
	if m := c.gc.memo[id]; m != nil && !c.cfg.Lifecycle.GCDryRun {
		m.indexOK, m.indexFrontier = true, frontier
	}
	c.gc.mu.Unlock()
}

// gcGensRetired / gcNoteGensRetired: the same for generation records below
// genKey(bound).
func (c *Core) gcGensRetired(id ID, bound int64) bool {
	c.gc.mu.Lock()
	defer c.gc.mu.Unlock()
	m := c.gc.memo[id]
	return m != nil && m.genOK && m.genBound == bound
}

func (c *Core) gcNoteGensRetired(id ID, bound int64) {
	c.gc.mu.Lock()
	if m := c.gc.memo[id]; m != nil && !c.cfg.Lifecycle.GCDryRun {
		m.genOK, m.genBound = true, bound
	}
	c.gc.mu.Unlock()
}

// gcJournalEmpty reports whether stream id's journal is known empty, and
// the write count to hand gcNoteJournal after a drain.
func (c *Core) gcJournalEmpty(id ID) (bool, uint64) {
	c.gc.mu.Lock()
	defer c.gc.mu.Unlock()
	m := c.gc.memo[id]
	if m == nil {
		return false, 0
	}
	return m.journalEmpty, m.journalTouch
}

// gcNoteJournal records what a drain that began at write count touch
// found; a write since then keeps the journal due.
func (c *Core) gcNoteJournal(id ID, touch uint64, empty bool) {
	c.gc.mu.Lock()
	if m := c.gc.memo[id]; m != nil && !c.cfg.Lifecycle.GCDryRun {
		m.journalEmpty = empty && m.journalTouch == touch
	}
	c.gc.mu.Unlock()
}

// gcTouchJournal is called around every retire-journal write of stream id
// (by GC, the orphan sweep and view retirement): the next pass drains it.
func (c *Core) gcTouchJournal(id ID) {
	c.gc.mu.Lock()
	if m := c.gc.memo[id]; m != nil {
		m.journalTouch++
		m.journalEmpty = false
	}
	c.gc.mu.Unlock()
}

// gcPrune drops the memo (and orphan-sweep times) of streams the complete
// pass passN did not visit: no longer owned, or deleted. A stream that
// comes back starts with a full pass and a fresh sweep.
func (c *Core) gcPrune(passN int) {
	c.gc.mu.Lock()
	defer c.gc.mu.Unlock()
	for id, m := range c.gc.memo {
		if m.seen < passN {
			delete(c.gc.memo, id)
		}
	}
	for id := range c.gc.swept {
		if _, ok := c.gc.memo[id]; !ok {
			delete(c.gc.swept, id)
		}
	}
}

// gcMergesQuiet reports whether considerMerges found nothing to do with
// these inputs last time; gcNoteMergesQuiet records that it did.
func (c *Core) gcMergesQuiet(id ID, in mergeInputs) bool {
	c.gc.mu.Lock()
	defer c.gc.mu.Unlock()
	m := c.gc.memo[id]
	return m != nil && m.mergesQuiet && m.mergeKey == in
}

func (c *Core) gcNoteMergesQuiet(id ID, in mergeInputs) {
	c.gc.mu.Lock()
	if m := c.gc.memo[id]; m != nil && !c.cfg.Lifecycle.GCDryRun {
		m.mergesQuiet, m.mergeKey = true, in
	}
	c.gc.mu.Unlock()
}

// gcMergeTaskEnded: a merge task of stream id ended (published, refused,
// failed or left its claim): the next pass looks again.
func (c *Core) gcMergeTaskEnded(id ID) {
	c.gc.mu.Lock()
	if m := c.gc.memo[id]; m != nil {
		m.mergesQuiet = false
	}
	c.gc.mu.Unlock()
}
