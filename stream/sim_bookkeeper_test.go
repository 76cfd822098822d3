package stream

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/bookkeeper/meta"
	"github.com/nereusstream/nereus-go/bookkeeper/namespace"
	"github.com/nereusstream/nereus-go/stream/bkwal"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// A simulated BookKeeper cluster, behind bkwal.Ledgers, so the real
// BookKeeper WAL provider (stream/bkwal) runs inside the deterministic
// simulation (issue 14 item 2, "the providers").
//
// What it models, on the simulated clock and the world's random source
// only (no goroutine, no timer outside the event queue):
//   - ledger metadata (ZooKeeper): create with a chosen ensemble, a
//     versioned OPEN -> CLOSED CAS, delete conditional on the version; a
//     ZooKeeper round trip parks the calling simulated goroutine;
//   - bookies: each add goes to its write set ((e+i) % E, i < WQ) as a
//     request that lands at the bookie after a latency as a world event —
//     it lands even if the writer crashed meanwhile — and whose answer
//     reaches the writer after another (unless its process crashed); the
//     writer acknowledges entries in order once each has AQ answers and
//     carries its LAC piggybacked on every add;
//   - failures: a bookie outage (down for a while: its requests fail fast,
//     or vanish so the add times out), transient add errors (retried on the
//     same bookie until the add timeout, then the writer is broken and
//     every pending add fails with an unknown outcome), an unknown create;
//   - fencing: a recovery-open fences the ledger on every reachable bookie
//     of its ensemble (it needs them to cover every write set, else
//     ErrRecoveryIncomplete), recovers the tail from the highest piggybacked
//     LAC — an entry found on any bookie of its write set is kept and
//     re-replicated, an entry enough bookies say they lack ends the ledger —
//     and closes the ledger there; a fenced bookie refuses adds (the writer
//     is fenced), and a writer's Close that finds the ledger closed by a
//     recovery reports ErrFenced with the recovery's end;
//   - reads: non-recovery opens (LAC = the closed end, or the highest
//     piggybacked LAC), Read refuses entries past the LAC, ReadUnconfirmed
//     reads any stored entry.
//
// Not modelled: ensemble changes (the real client does none either),
// bookie disk loss, the IN_RECOVERY metadata state, digests (the entries
// are the provider's own checksummed frames), the namespace proof (IDs
// come from one counter, never reused).
type simBK struct {
	w       *simWorld
	bookies []*simBookie
	ledgers map[int64]*simLedger
	grave   map[int64]*simLedger // deleted ledgers (the oracle reads them)
	nextID  int64
	// quorums of the provider's ledgers on this seed, and the add timeout
	e, wq, aq  int
	addTimeout time.Duration
	// onDelete is called before a ledger is deleted (the invariants)
	onDelete func(id int64)
	// traffic
	created, deletedN, recoveries, fenced, closes, adds, broken int
}

type simBookie struct {
	id        string
	downUntil int64
	blackhole bool // while down, requests vanish instead of failing
	entries   map[int64]map[int64]simBKEntry
	fenced    map[int64]bool
}

type simBKEntry struct {
	data []byte
	lac  int64 // the writer's LAC piggybacked on the add
}

type simLedger struct {
	id      int64
	md      *meta.LedgerMetadata
	version bookkeeper.Version
	ens     []int // bookie indexes
}

var simBKReservation = namespace.Reservation{Format: "v1", DeploymentID: "sim-deployment", Alias: "default",
	LedgersRoot: "/ledgers", InstanceID: "sim", Block: 1, First: 1 << 20, Last: 1<<21 - 1}

func newSimBK(w *simWorld, seed int64) *simBK {
	// The cluster shape from the seed alone (its own source): 3 bookies
	// and E=3, WQ=AQ=2 (the provider's default: any bookie outage breaks
	// the ledgers whose write sets hold it), or WQ=3 > AQ=2 (one outage is
	// survived), or 4 bookies for E=3 (some ledgers avoid the dead one).
	rng := rand.New(rand.NewSource(seed ^ 0xb00c1e))
	bk := &simBK{w: w, ledgers: map[int64]*simLedger{}, grave: map[int64]*simLedger{}, nextID: simBKReservation.First}
	n := 3
	switch rng.Intn(4) {
	case 0:
		bk.e, bk.wq, bk.aq = 3, 3, 2
	case 1:
		n, bk.e, bk.wq, bk.aq = 4, 3, 2, 2
	case 2:
		n, bk.e, bk.wq, bk.aq = 2, 2, 2, 1
	default:
		bk.e, bk.wq, bk.aq = 3, 2, 2
	}
	bk.addTimeout = time.Duration(5+rng.Intn(40)) * time.Millisecond
	for i := 0; i < n; i++ {
		bk.bookies = append(bk.bookies, &simBookie{id: fmt.Sprintf("bookie-%d:3181", i),
			entries: map[int64]map[int64]simBKEntry{}, fenced: map[int64]bool{}})
	}
	return bk
}

func (b *simBookie) up(now int64) bool { return now >= b.downUntil }

// zk parks the calling simulated goroutine for a ZooKeeper round trip
// (no-op on the event loop).
func (bk *simBK) zk() { bk.w.sleepCoro(bk.w.jitter(bk.w.faults.maxMetaLat)) }

// rtt parks the calling simulated goroutine for a bookie round trip.
func (bk *simBK) rtt() { bk.w.sleepCoro(bk.w.jitter(bk.w.faults.maxWALLat)) }

func writeSetOf(e int64, ens, wq int) []int {
	ws := make([]int, wq)
	for i := range ws {
		ws[i] = int((e + int64(i)) % int64(ens))
	}
	return ws
}

// bkCovered: fewer than AQ of every write set are unanswered
// (RRQuorumCoverageSet, as the real client's recovery).
func bkCovered(ok []bool, wq, aq int) bool {
	e := len(ok)
	for i := 0; i < e; i++ {
		bad := 0
		for j := 0; j < wq; j++ {
			if !ok[(i+j)%e] {
				bad++
			}
		}
		if bad >= aq {
			return false
		}
	}
	return true
}

// planOutages schedules this seed's bookie outages in the active phase
// (each 10–150 ms; requests to a dead bookie fail fast or vanish), and
// extends the active phase past them: the quiet phase must be healthy.
func (h *simHarness) planBookieOutages() {
	rng := rand.New(rand.NewSource(h.w.seed ^ 0x0b00c1e5))
	for k := rng.Intn(4); k > 0; k-- {
		b := h.bk.bookies[rng.Intn(len(h.bk.bookies))]
		start := h.w.now + rng.Int63n(max(1, h.activeEnd-h.w.now))
		end := start + int64(time.Duration(10+rng.Intn(140))*time.Millisecond)
		hole := rng.Intn(2) == 0
		h.activeEnd = max(h.activeEnd, end+int64(50*time.Millisecond))
		h.w.at(start, nil, func() {
			h.stats.bookieOutages++
			b.downUntil = max(b.downUntil, end)
			b.blackhole = hole
			h.w.tracef("OUTAGE %s down until %.3fms (blackhole %v)", b.id, float64(end-simEpoch)/1e6, hole)
		})
	}
}

// ---- the client of one process incarnation (bkwal.Ledgers) ----

type simBKClient struct {
	bk *simBK
	p  *simProc
}

var _ bkwal.Ledgers = simBKClient{}

func (c simBKClient) Reservation() namespace.Reservation { return simBKReservation }

func (c simBKClient) Allocate(ctx context.Context) (int64, error) {
	c.bk.zk()
	if c.bk.w.chance(c.bk.w.faults.metaFail) {
		return 0, errors.New("sim: ledger-ID allocation: store did not answer")
	}
	id := c.bk.nextID
	c.bk.nextID++
	return id, nil
}

func (c simBKClient) CreateLedger(ctx context.Context, o bookkeeper.CreateOptions) (bkwal.LedgerWriter, error) {
	bk, w := c.bk, c.bk.w
	bk.zk()
	if _, ok := bk.ledgers[o.LedgerID]; ok || bk.grave[o.LedgerID] != nil {
		return nil, fmt.Errorf("%w: %d", bookkeeper.ErrLedgerExists, o.LedgerID)
	}
	var up []int
	for i, b := range bk.bookies {
		if b.up(w.now) {
			up = append(up, i)
		}
	}
	if len(up) < o.EnsembleSize {
		return nil, fmt.Errorf("%w: need %d, have %d", bookkeeper.ErrNotEnoughBookies, o.EnsembleSize, len(up))
	}
	w.rng.Shuffle(len(up), func(i, j int) { up[i], up[j] = up[j], up[i] })
	ens := slices.Clone(up[:o.EnsembleSize])
	names := make([]string, len(ens))
	for i, b := range ens {
		names[i] = bk.bookies[b].id
	}
	custom := maps.Clone(o.Custom)
	if custom == nil {
		custom = map[string][]byte{}
	}
	custom[namespace.OwnerKey] = []byte(simBKReservation.DeploymentID)
	md := &meta.LedgerMetadata{EnsembleSize: int32(o.EnsembleSize), WriteQuorum: int32(o.WriteQuorum), AckQuorum: int32(o.AckQuorum),
		State: meta.StateOpen, LastEntryID: -1, Segments: []meta.Segment{{FirstEntryID: 0, Ensemble: names}},
		DigestType: o.DigestType, Password: o.Password, Custom: custom}
	if w.chance(w.faults.metaFail / 4) {
		// The create's answer was lost and re-reading could not settle it
		// in time: it may or may not have landed.
		if w.chance(0.5) {
			bk.ledgers[o.LedgerID] = &simLedger{id: o.LedgerID, md: md, version: 1, ens: ens}
			bk.created++
		}
		return nil, &bookkeeper.CreateUnknownError{LedgerID: o.LedgerID, CToken: 1, Err: errors.New("sim: create unanswered")}
	}
	led := &simLedger{id: o.LedgerID, md: md, version: 1, ens: ens}
	bk.ledgers[o.LedgerID] = led
	bk.created++
	return &simBKWriter{bk: bk, p: c.p, led: led, version: 1, lac: -1, ens: ens, wq: o.WriteQuorum, aq: o.AckQuorum}, nil
}

func (c simBKClient) DeleteLedger(ctx context.Context, id int64, expected bookkeeper.Version) error {
	bk := c.bk
	bk.zk()
	led := bk.ledgers[id]
	if led == nil {
		return fmt.Errorf("%w: %d", bookkeeper.ErrNoSuchLedger, id)
	}
	if led.version != expected {
		return fmt.Errorf("%w: ledger %d at %d, expected %d", bookkeeper.ErrBadVersion, id, led.version, expected)
	}
	if bk.onDelete != nil {
		bk.onDelete(id)
	}
	delete(bk.ledgers, id)
	bk.grave[id] = led
	bk.deletedN++
	bk.w.tracef("bookkeeper: ledger %d deleted", id)
	return nil
}

func (c simBKClient) ReadLedgerMetadata(ctx context.Context, id int64) (bookkeeper.LedgerInfo, error) {
	bk := c.bk
	bk.zk()
	if bk.w.chance(bk.w.faults.metaFail) {
		return bookkeeper.LedgerInfo{}, fmt.Errorf("sim: reading ledger %d: %w", id, bookkeeper.ErrMetadataUnavailable)
	}
	led := bk.ledgers[id]
	if led == nil {
		return bookkeeper.LedgerInfo{}, fmt.Errorf("%w: %d", bookkeeper.ErrNoSuchLedger, id)
	}
	return bookkeeper.LedgerInfo{LedgerID: id, Metadata: led.md.Clone(), Version: led.version}, nil
}

func (c simBKClient) OpenLedger(ctx context.Context, id int64, o bookkeeper.OpenOptions) (bkwal.LedgerReader, error) {
	bk := c.bk
	bk.zk()
	led := bk.ledgers[id]
	if led == nil {
		return nil, fmt.Errorf("%w: %d", bookkeeper.ErrNoSuchLedger, id)
	}
	r := &simBKReader{bk: bk, led: led, md: led.md.Clone(), version: led.version, lac: led.md.LastEntryID}
	if led.md.State != meta.StateClosed {
		// readLastConfirmed: the highest LAC piggybacked on the entries of
		// the reachable bookies.
		bk.rtt()
		r.lac = -1
		answered := false
		for _, bi := range led.ens {
			b := bk.bookies[bi]
			if !b.up(bk.w.now) {
				continue
			}
			answered = true
			for _, ent := range b.entries[id] {
				r.lac = max(r.lac, ent.lac)
			}
		}
		if !answered {
			return nil, fmt.Errorf("%w: no bookie of ledger %d answered", bookkeeper.ErrBookieUnavailable, id)
		}
	}
	return r, nil
}

func (c simBKClient) RecoverLedger(ctx context.Context, id int64, o bookkeeper.OpenOptions) (bkwal.LedgerReader, error) {
	bk, w := c.bk, c.bk.w
	bk.zk()
	led := bk.ledgers[id]
	if led == nil {
		return nil, fmt.Errorf("%w: %d", bookkeeper.ErrNoSuchLedger, id)
	}
	if led.md.State != meta.StateClosed {
		// Fence on every reachable bookie of the ensemble; they must
		// cover every write set.
		bk.rtt()
		ok := make([]bool, len(led.ens))
		lac := int64(-1)
		for i, bi := range led.ens {
			b := bk.bookies[bi]
			if !b.up(w.now) {
				continue
			}
			ok[i] = true
			b.fenced[id] = true
			for _, ent := range b.entries[id] {
				lac = max(lac, ent.lac)
			}
		}
		wq, aq := int(led.md.WriteQuorum), int(led.md.AckQuorum)
		if !bkCovered(ok, wq, aq) {
			return nil, fmt.Errorf("%w: ledger %d: too few bookies reachable to fence", bookkeeper.ErrRecoveryIncomplete, id)
		}
		bk.fenced++
		// Recover the tail: entries above the LAC, one by one, until one
		// that enough of its write set lack (it cannot have reached AQ).
		bk.rtt()
		end := lac
		for e := lac + 1; ; e++ {
			var data []byte
			missing := 0
			var reach []*simBookie
			for _, i := range writeSetOf(e, len(led.ens), wq) {
				b := bk.bookies[led.ens[i]]
				if !b.up(w.now) {
					continue
				}
				reach = append(reach, b)
				if ent, has := b.entries[id][e]; has {
					data = ent.data
				} else {
					missing++
				}
			}
			if data != nil {
				for _, b := range reach { // recovery adds pass the fence
					b.store(id, e, simBKEntry{data: data, lac: lac})
				}
				end = e
				continue
			}
			if missing >= wq-aq+1 {
				break
			}
			return nil, fmt.Errorf("%w: ledger %d entry %d: too few bookies reachable", bookkeeper.ErrRecoveryIncomplete, id, e)
		}
		bk.zk()
		if bk.ledgers[id] != led {
			return nil, fmt.Errorf("%w: %d", bookkeeper.ErrNoSuchLedger, id)
		}
		if led.md.State != meta.StateClosed { // else the writer (or another recovery) closed it meanwhile
			led.md.State, led.md.LastEntryID = meta.StateClosed, end
			led.version++
			bk.recoveries++
			w.tracef("bookkeeper: ledger %d recovered and closed at entry %d", id, end)
		}
	}
	return &simBKReader{bk: bk, led: led, md: led.md.Clone(), version: led.version, lac: led.md.LastEntryID}, nil
}

func (b *simBookie) store(id, e int64, ent simBKEntry) {
	m := b.entries[id]
	if m == nil {
		m = map[int64]simBKEntry{}
		b.entries[id] = m
	}
	m[e] = ent
}

// ---- writer ----

type simBKWriter struct {
	bk      *simBK
	p       *simProc
	led     *simLedger
	version bookkeeper.Version
	ens     []int
	wq, aq  int
	next    int64
	lac     int64
	state   int // simWOpen, simWClosing, simWClosed, simWBroken, simWFenced
	pending []*simBKAdd
	result  bookkeeper.CloseResult
}

const (
	simWOpen = iota
	simWClosing
	simWClosed
	simWBroken
	simWFenced
)

type simBKAdd struct {
	e     int64
	data  []byte
	acked map[int]bool
	fut   *simBKFuture
	stop  func() bool
}

type simBKFuture struct {
	id   int64
	done chan struct{}
	err  error
}

func (f *simBKFuture) EntryID() int64        { return f.id }
func (f *simBKFuture) Done() <-chan struct{} { return f.done }
func (f *simBKFuture) Err() error            { return f.err }

var _ bkwal.LedgerWriter = (*simBKWriter)(nil)

func (wr *simBKWriter) MaxEntrySize() int { return 5 << 20 }

func (wr *simBKWriter) AppendAsync(ctx context.Context, payload []byte) (bkwal.AddFuture, error) {
	switch wr.state {
	case simWBroken:
		return nil, fmt.Errorf("%w: ledger %d", bookkeeper.ErrWriterBroken, wr.led.id)
	case simWFenced:
		return nil, fmt.Errorf("%w: ledger %d", bookkeeper.ErrFenced, wr.led.id)
	case simWClosing, simWClosed:
		return nil, fmt.Errorf("%w: ledger %d", bookkeeper.ErrLedgerClosed, wr.led.id)
	}
	a := &simBKAdd{e: wr.next, data: slices.Clone(payload), acked: map[int]bool{},
		fut: &simBKFuture{id: wr.next, done: make(chan struct{})}}
	wr.next++
	wr.pending = append(wr.pending, a)
	wr.bk.adds++
	a.stop = wr.p.afterFunc(wr.bk.addTimeout, func() { wr.timeout(a) })
	for _, i := range writeSetOf(a.e, len(wr.ens), wr.wq) {
		wr.send(a, i)
	}
	return a.fut, nil
}

// send one add to ensemble member i: the request lands at the bookie as a
// world event (even if the writer's process crashed meanwhile); the answer
// is an event of the writer's process.
func (wr *simBKWriter) send(a *simBKAdd, i int) {
	bk, w := wr.bk, wr.bk.w
	b := bk.bookies[wr.ens[i]]
	id, lac := wr.led.id, wr.lac
	w.after(w.jitter(w.faults.maxWALLat), nil, func() {
		var rc error
		switch {
		case !b.up(w.now) && b.blackhole:
			return // no answer: the add times out
		case !b.up(w.now):
			rc = bookkeeper.ErrBookieUnavailable
		case b.fenced[id]:
			rc = bookkeeper.ErrFenced
		case w.chance(w.faults.walFail / 2):
			rc = bookkeeper.ErrBookieUnavailable // a transient error (EIO, too many requests)
		default:
			b.store(id, a.e, simBKEntry{data: a.data, lac: lac})
		}
		w.after(w.jitter(w.faults.maxWALLat), wr.p, func() { wr.answer(a, i, rc) }).lib = true
	})
}

func (wr *simBKWriter) answer(a *simBKAdd, i int, rc error) {
	if a.fut.err != nil || isClosedCh(a.fut.done) || wr.state >= simWClosed {
		return
	}
	switch {
	case rc == nil:
		a.acked[i] = true
		wr.advance()
	case errors.Is(rc, bookkeeper.ErrFenced):
		wr.fail(simWFenced, bookkeeper.ErrFenced)
	default:
		// Retried on the same bookie until the add timeout.
		wr.bk.w.after(time.Duration(1+wr.bk.w.rng.Intn(3))*time.Millisecond, wr.p, func() {
			if !isClosedCh(a.fut.done) && wr.state < simWClosed {
				wr.send(a, i)
			}
		}).lib = true
	}
}

// advance acknowledges entries in order, each once it has AQ answers.
func (wr *simBKWriter) advance() {
	for len(wr.pending) > 0 && len(wr.pending[0].acked) >= wr.aq {
		a := wr.pending[0]
		wr.pending = wr.pending[1:]
		a.stop()
		wr.lac = a.e
		close(a.fut.done)
	}
}

func (wr *simBKWriter) timeout(a *simBKAdd) {
	if isClosedCh(a.fut.done) || wr.state >= simWClosed {
		return
	}
	wr.bk.broken++
	wr.fail(simWBroken, bookkeeper.ErrWriterBroken)
}

// fail ends every pending add with an unknown outcome.
func (wr *simBKWriter) fail(state int, cause error) {
	wr.state = state
	for _, a := range wr.pending {
		a.stop()
		a.fut.err = &bookkeeper.AddError{LedgerID: wr.led.id, EntryID: a.e, Err: cause}
		close(a.fut.done)
	}
	wr.pending = nil
}

func (wr *simBKWriter) Close(ctx context.Context) (bookkeeper.CloseResult, error) {
	bk, w := wr.bk, wr.bk.w
	if wr.state == simWClosed {
		return wr.result, nil
	}
	if wr.state == simWOpen {
		wr.state = simWClosing
	}
	w.blockCoro(func() bool { return len(wr.pending) == 0 || wr.state != simWClosing || ctx.Err() != nil })
	bk.zk()
	led := bk.ledgers[wr.led.id]
	if led == nil {
		return bookkeeper.CloseResult{}, fmt.Errorf("%w: %d", bookkeeper.ErrNoSuchLedger, wr.led.id)
	}
	if wr.state == simWFenced || led.version != wr.version {
		if wr.state != simWFenced && led.md.State == meta.StateClosed && led.md.LastEntryID == wr.lac {
			return wr.finish(bookkeeper.CloseResult{LastEntryID: wr.lac, Version: led.version}), nil
		}
		wr.fail(simWFenced, bookkeeper.ErrFenced)
		if led.md.State == meta.StateClosed {
			return bookkeeper.CloseResult{LastEntryID: led.md.LastEntryID, Version: led.version},
				fmt.Errorf("%w: ledger %d was recovered and closed at entry %d", bookkeeper.ErrFenced, led.id, led.md.LastEntryID)
		}
		return bookkeeper.CloseResult{}, fmt.Errorf("%w: ledger %d is being recovered", bookkeeper.ErrFenced, led.id)
	}
	led.md.State, led.md.LastEntryID = meta.StateClosed, wr.lac
	led.version++
	bk.closes++
	return wr.finish(bookkeeper.CloseResult{LastEntryID: wr.lac, Version: led.version}), nil
}

func (wr *simBKWriter) finish(res bookkeeper.CloseResult) bookkeeper.CloseResult {
	wr.state, wr.result, wr.version = simWClosed, res, res.Version
	for _, a := range wr.pending {
		a.stop()
		a.fut.err = fmt.Errorf("%w: ledger %d sealed at entry %d before entry %d was acknowledged", bookkeeper.ErrLedgerClosed, wr.led.id, res.LastEntryID, a.e)
		close(a.fut.done)
	}
	wr.pending = nil
	return res
}

func isClosedCh(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// ---- reader ----

type simBKReader struct {
	bk      *simBK
	led     *simLedger
	md      *meta.LedgerMetadata
	version bookkeeper.Version
	lac     int64
}

var _ bkwal.LedgerReader = (*simBKReader)(nil)

func (r *simBKReader) LastAddConfirmed() int64 { return r.lac }

func (r *simBKReader) Info() bookkeeper.LedgerInfo {
	return bookkeeper.LedgerInfo{LedgerID: r.led.id, Metadata: r.md.Clone(), Version: r.version}
}

func (r *simBKReader) Read(ctx context.Context, first, last int64) ([]bookkeeper.Entry, error) {
	if last > r.lac {
		return nil, fmt.Errorf("%w: entry %d past the LAC %d", bookkeeper.ErrInvalidArgument, last, r.lac)
	}
	return r.ReadUnconfirmed(ctx, first, last)
}

func (r *simBKReader) ReadUnconfirmed(ctx context.Context, first, last int64) ([]bookkeeper.Entry, error) {
	bk, w := r.bk, r.bk.w
	if first < 0 || last < first {
		return nil, fmt.Errorf("%w: entries %d..%d", bookkeeper.ErrInvalidArgument, first, last)
	}
	bk.rtt()
	var out []bookkeeper.Entry
	for e := first; e <= last; e++ {
		var data []byte
		down := false
		for _, i := range writeSetOf(e, len(r.led.ens), int(r.md.WriteQuorum)) {
			b := bk.bookies[r.led.ens[i]]
			if !b.up(w.now) {
				down = true
				continue
			}
			if ent, ok := b.entries[r.led.id][e]; ok {
				data = ent.data
				break
			}
		}
		switch {
		case data != nil:
			out = append(out, bookkeeper.Entry{EntryID: e, Payload: slices.Clone(data)})
		case down:
			return nil, fmt.Errorf("%w: ledger %d entry %d", bookkeeper.ErrBookieUnavailable, r.led.id, e)
		default:
			return nil, fmt.Errorf("%w: ledger %d entry %d", bookkeeper.ErrNoEntry, r.led.id, e)
		}
	}
	return out, nil
}

// ---- the harness side ----

var simBKWAL = flag.String("sim.bkwal", "mixed", "which seeds run the real BookKeeper WAL (stream/bkwal) on the simulated BookKeeper: mixed (an eighth of the seeds without lifecycle), on, off")

// simBKWALMode overrides -sim.bkwal (the mutation check sets it).
var simBKWALMode string

// chooseRealBK decides from the seed alone (its own source: every other
// seed runs exactly as before) whether this seed runs the real BookKeeper
// WAL on a simulated BookKeeper cluster.
func (h *simHarness) chooseRealBK() {
	switch cmp.Or(simBKWALMode, *simBKWAL) {
	case "on":
		h.realBK = true
	case "off":
		h.realBK = false
	default:
		h.realBK = !h.lifecycle && rand.New(rand.NewSource(h.w.seed^0x0bbb0a1)).Intn(8) == 0
	}
	if h.realBK {
		h.bk = newSimBK(h.w, h.w.seed)
		h.bk.onDelete = h.onLedgerDelete
	}
}

// openBKWAL opens broker p's real BookKeeper WAL on the simulated cluster.
func (h *simHarness) openBKWAL(p *simProc) (*bkwal.Provider, error) {
	rng := h.w.rng
	return bkwal.Open(bkwal.Config{Ledgers: simBKClient{h.bk, p}, Runtime: simWALRuntime{p}, Meta: h.meta,
		WriterID: p.name, Logger: h.logger(p),
		EnsembleSize: h.bk.e, WriteQuorum: h.bk.wq, AckQuorum: h.bk.aq,
		// Small ledgers: rollovers (a seal while runs of the last ledger
		// are still being committed) happen within a seed.
		MaxLedgerEntries: int64(3 + rng.Intn(30)),
		OpTimeout:        2 * time.Second,
	})
}

// bkTargets calls f for every committed BookKeeper run of a live stream
// that lies above its stream's frontier (max(Start, GenThrough)).
func (h *simHarness) bkTargets(f func(id ID, ledger, first, count, start, end int64)) {
	for id, ds := range h.meta.oracle.committed {
		hd, ok := h.storedHead(id)
		if !ok || hd.State == StateDeleted {
			continue
		}
		for _, d := range ds {
			if d.Provider != bkwal.Name {
				continue
			}
			for i, pt := range d.Parts {
				end := d.partEnd(i)
				if end <= max(hd.Start, hd.GenThrough) {
					continue
				}
				led, first, count, err := bkwal.TargetLedger(pt.Target)
				if err != nil {
					h.violate("committed run [%d,%d) of %v: bookkeeper target: %v", pt.Start, end, id, err)
					continue
				}
				f(id, led, first, count, pt.Start, end)
			}
		}
	}
}

// onLedgerDelete runs before a ledger is deleted: no committed run in it
// may lie above its stream's frontier.
func (h *simHarness) onLedgerDelete(ledger int64) {
	h.bkTargets(func(id ID, led, first, count, start, end int64) {
		if led == ledger {
			h.violate("ledger %d deleted holding committed run [%d,%d) of %v (entries %d..%d) above its frontier",
				ledger, start, end, id, first, first+count-1)
		}
	})
}

// checkBKDurable (after the audit): every committed BookKeeper run still
// needed is in an existing ledger, each of its entries stored on at least
// AQ bookies of its write set (so it survives the loss of any AQ-1), and
// within the ledger's end once the ledger is closed.
func (h *simHarness) checkBKDurable() {
	bk := h.bk
	h.bkTargets(func(id ID, ledger, first, count, start, end int64) {
		led := bk.ledgers[ledger]
		if led == nil {
			h.violate("committed run [%d,%d) of %v: ledger %d does not exist", start, end, id, ledger)
			return
		}
		wq, aq := int(led.md.WriteQuorum), int(led.md.AckQuorum)
		for e := first; e < first+count; e++ {
			if led.md.State == meta.StateClosed && e > led.md.LastEntryID {
				h.violate("committed run [%d,%d) of %v: entry %d past ledger %d's end %d", start, end, id, e, ledger, led.md.LastEntryID)
				return
			}
			n := 0
			for _, i := range writeSetOf(e, len(led.ens), wq) {
				if _, ok := bk.bookies[led.ens[i]].entries[ledger][e]; ok {
					n++
				}
			}
			if n < aq {
				h.violate("committed run [%d,%d) of %v: ledger %d entry %d on %d bookies, ack quorum %d", start, end, id, ledger, e, n, aq)
				return
			}
		}
	})
}

// rawRun is the oracle's read of a committed BookKeeper run, from any
// bookie, deleted ledger or not.
func (bk *simBK) rawRun(tgt []byte, start int64) (provider.Run, bool) {
	ledger, first, count, err := bkwal.TargetLedger(tgt)
	if err != nil {
		return provider.Run{}, false
	}
	run := provider.Run{Start: start}
	for e := first; e < first+count; e++ {
		var data []byte
		for _, b := range bk.bookies {
			if ent, ok := b.entries[ledger][e]; ok {
				data = ent.data
				break
			}
		}
		if data == nil {
			return provider.Run{}, false
		}
		re, err := bkwal.ParseEntry(data)
		if err != nil {
			return provider.Run{}, false
		}
		run.Entries = append(run.Entries, provider.Entry{Payload: re.Payload, RecordCount: re.RecordCount, Timestamp: re.Timestamp})
	}
	return run, true
}

func (bk *simBK) addStats(s *simStats) {
	s.realBKSeeds++
	s.bkLedgers += bk.created
	s.bkDeleted += bk.deletedN
	s.bkRecoveries += bk.recoveries
	s.bkFenced += bk.fenced
	s.bkAdds += bk.adds
	s.bkBroken += bk.broken
}
