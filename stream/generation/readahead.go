package generation

import (
	"container/list"
	"context"
	"time"

	"github.com/nereusstream/nereus-go/objectstore"
)

// Read-ahead: a catch-up reader alternates between waiting for a GET and
// verifying what it returned. With a read-ahead budget, a successful Read
// that stops before the object's end starts the GET of the next span (same
// byte budget) in the background, so the next sequential Read of that span
// finds its bytes fetched, or in flight, and only verifies them. Prefetched
// bytes are verified exactly like any others (DecodeSpan), a failed
// prefetch is never reported (the Read issues its own GET), and a prefetch
// nobody claimed within aheadStale is dropped when the budget is needed
// for a newer one. A younger one is kept and the newer one not started:
// with many streams read in turn (a Kafka fetch over its partitions) the
// oldest prefetch is the one whose reader comes back first, so dropping it
// for one that is needed later wasted the device's work on it (session 14:
// half the prefetches of 16 streams were dropped unused that way).
//
// Invariant: aheadBytes is the sum of n over the prefetches in r.ahead, and
// never exceeds r.aheadBudget when one is inserted.

// readAheadTimeout bounds a background GET, which has no caller to cancel
// it.
const readAheadTimeout = 30 * time.Second

// aheadStale is how long a completed prefetch is kept for its reader
// against a newer one that needs its budget.
const aheadStale = 2 * time.Second

type aheadKey struct {
	key string
	off int64
}

type prefetch struct {
	at   aheadKey
	info Info
	n    int64
	el   *list.Element // in r.aheadLRU
	born time.Time     // when it was started (or kept)
	done chan struct{}
	raw  []byte
	buf  *Buffer // raw's pooled buffer (nil: not pooled)
	err  error
}

// SetReadAhead sets the byte budget of spans fetched ahead of sequential
// readers (0, the default, disables read-ahead; a Reader then starts no
// goroutines). Each prefetch is one ranged GET of the span a sequential
// Read with the same maxBytes would fetch next.
func (r *Reader) SetReadAhead(budget int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.aheadBudget = max(budget, 0)
	for r.aheadBytes > r.aheadBudget && r.aheadLRU.Len() > 0 {
		r.dropAheadLocked(r.aheadLRU.Back().Value.(*prefetch))
	}
}

// takeAhead returns the prefetched bytes of key from byte position off
// (a block start), if a prefetch from there exists and succeeded; ok is
// false if the caller must GET them itself. The bytes end on a block
// boundary but may be fewer or more than the caller's span (a prefetch
// guessed the next Read's budget); the caller uses what fits. buf, when
// non-nil, is the pooled buffer holding raw, now the caller's (to hand
// on with the entries or to drop; never released while raw is in use).
// It waits for a prefetch in flight.
func (r *Reader) takeAhead(ctx context.Context, key string, info Info, off int64) (raw []byte, buf *Buffer, ok bool, err error) {
	r.mu.Lock()
	p := r.ahead[aheadKey{key, off}]
	if p != nil {
		r.dropAheadLocked(p)
	}
	r.mu.Unlock()
	if p == nil || p.info != info {
		return nil, nil, false, nil
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, nil, false, ctx.Err()
	}
	if p.err != nil {
		return nil, nil, false, nil
	}
	r.aheadHits.Add(1)
	return p.raw, p.buf, true, nil
}

// keepAhead keeps raw, the verified-later bytes of key from block start off
// that a Read took from a longer prefetch and did not need, as a completed
// prefetch for the next Read, if the budget allows.
func (r *Reader) keepAhead(key string, info Info, off int64, raw []byte, buf *Buffer) {
	n := int64(len(raw))
	at := aheadKey{key, off}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.aheadBudget <= 0 || r.ahead[at] != nil || r.aheadBytes+n > r.aheadBudget {
		buf.Release()
		return
	}
	p := &prefetch{at: at, info: info, n: n, born: time.Now(), done: make(chan struct{}), raw: raw, buf: buf}
	close(p.done)
	p.el = r.aheadLRU.PushFront(p)
	r.ahead[at] = p
	r.aheadBytes += n
}

// Prefetch starts fetching, in the background, the span a Read of key
// (described by info) from offset from with maxBytes would fetch: a
// sequential reader that will cross into this object next (read-ahead
// within one object is automatic; the Reader does not know which object
// follows). The footer is loaded first if it is not cached. A no-op
// without a read-ahead budget, for an offset outside the object, or when
// the budget is taken. Nothing it fetches is used unverified: a Read
// decodes prefetched bytes like any others.
func (r *Reader) Prefetch(ctx context.Context, key string, info Info, from int64, maxBytes int) {
	if from < info.Start || from >= info.End || !r.readAheadOn() {
		return
	}
	r.mu.Lock()
	var f *Footer
	if el, ok := r.items[key]; ok && el.Value.(*cacheItem).f.info == info {
		f = el.Value.(*cacheItem).f
	}
	r.mu.Unlock()
	if f != nil {
		r.startAhead(ctx, key, f, from, maxBytes)
		return
	}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readAheadTimeout)
	go func() {
		defer cancel()
		if f, err := r.Footer(gctx, key, info); err == nil {
			r.startAhead(gctx, key, f, from, maxBytes)
		}
	}()
}

// aheadAfter starts the read-ahead of the span a Read of maxBytes from the
// block at byte pos of key would fetch (pos: where a span just read ends),
// if read-ahead is on, maxBytes > 0 and the object goes on there.
func (r *Reader) aheadAfter(ctx context.Context, key string, f *Footer, pos int64, maxBytes int) {
	if maxBytes <= 0 || !r.readAheadOn() {
		return
	}
	if next, ok := f.firstAt(pos); ok {
		r.startAhead(ctx, key, f, next, maxBytes)
	}
}

// startAhead starts fetching the span that a Read from offset next with
// maxBytes would fetch, if read-ahead is on, the budget allows and the
// span is not in the store's memory already. A store that can tell
// (objectstore.CacheProber: fsstore asks the page cache) is asked first:
// a span a read would copy from memory gains nothing from being fetched
// early and would cost a goroutine hand-off, a buffer and the copy on
// another core, so a warm reader runs exactly as without read-ahead and
// only a reader that waits for the device keeps its next span in flight.
func (r *Reader) startAhead(ctx context.Context, key string, f *Footer, next int64, maxBytes int) {
	if next >= f.info.End {
		return
	}
	off, n, err := f.Span(next, maxBytes)
	if err != nil {
		return
	}
	at := aheadKey{key, off}
	r.mu.Lock()
	taken := n > r.aheadBudget || r.ahead[at] != nil
	r.mu.Unlock()
	if taken {
		return
	}
	if cached, err := objectstore.Cached(ctx, r.store, key, off, n); err != nil || cached {
		r.aheadCached.Add(1)
		return
	}
	r.mu.Lock()
	if n > r.aheadBudget || r.ahead[at] != nil {
		r.mu.Unlock()
		return
	}
	for r.aheadBytes+n > r.aheadBudget {
		oldest := r.aheadLRU.Back().Value.(*prefetch)
		select {
		case <-oldest.done:
			if time.Since(oldest.born) >= aheadStale {
				r.dropAheadLocked(oldest)
				oldest.buf.Release() // unclaimed: nobody else can reach it
				continue
			}
		default:
		}
		// The oldest is still in flight or fresh: its reader is probably
		// about to claim it. Skip this prefetch rather than over-commit.
		r.mu.Unlock()
		return
	}
	p := &prefetch{at: at, info: f.info, n: n, born: time.Now(), done: make(chan struct{})}
	p.el = r.aheadLRU.PushFront(p)
	r.ahead[at] = p
	r.aheadBytes += n
	r.mu.Unlock()

	r.aheadStarted.Add(1)
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readAheadTimeout)
	go func() {
		defer cancel()
		var buf *Buffer
		if _, into := r.store.(objectstore.RangeReader); into {
			buf = getBuffer(n)
		}
		raw, err := r.fetch(gctx, key, off, n, buf) // verified by the Read that claims it
		if err == nil && int64(len(raw)) != n {
			raw, err = nil, ErrCorrupt // short: let the Read's own GET report it
		}
		if err != nil {
			buf.Release()
			buf = nil
		}
		// An unclaimed prefetch's buffer is left to the collector: a
		// reader may have claimed it meanwhile.
		p.raw, p.buf, p.err = raw, buf, err
		close(p.done)
	}()
}

func (r *Reader) dropAheadLocked(p *prefetch) {
	if r.ahead[p.at] == p {
		delete(r.ahead, p.at)
		r.aheadLRU.Remove(p.el)
		r.aheadBytes -= p.n
	}
}

// forgetAheadLocked drops every prefetch of key.
func (r *Reader) forgetAheadLocked(key string) {
	for el := r.aheadLRU.Front(); el != nil; {
		next := el.Next()
		if p := el.Value.(*prefetch); p.at.key == key {
			r.dropAheadLocked(p)
		}
		el = next
	}
}

// FooterAhead starts loading, in the background, the footer of the object
// at key (described by info) unless it is cached or being loaded: a
// sequential reader that will cross into that object (the stream knows
// which object follows; the Reader does not) then finds the footer cached
// instead of waiting for its read from the device at the object's first
// Read. It is independent of the read-ahead budget: one goroutine and one
// small ranged read per object, and nothing is fetched that the Read would
// not fetch itself. The footer is checked as Footer checks it (a corrupt
// or missing one is not cached; the Read then loads it again and reports
// its own error).
func (r *Reader) FooterAhead(ctx context.Context, key string, info Info) {
	r.mu.Lock()
	el, cached := r.items[key]
	_, loading := r.loading[key]
	r.mu.Unlock()
	if loading || (cached && el.Value.(*cacheItem).f.info == info) {
		return
	}
	r.footersAhead.Add(1)
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readAheadTimeout)
	r.footersAheadWG.Add(1)
	go func() {
		defer r.footersAheadWG.Done()
		defer cancel()
		_, _ = r.Footer(gctx, key, info)
	}()
}
