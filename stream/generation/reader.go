package generation

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nereusstream/nereus-go/objectstore"
)

// Reader reads generation objects from an object store, keeping parsed
// footers in a bounded LRU cache so that a read costs one ranged GET once an
// object's footer is cached (a footer GET and a data GET before). Concurrent
// misses on one key share one footer GET. With SetReadAhead, sequential
// readers find their next span already fetched (readahead.go). Safe for
// concurrent use.
type Reader struct {
	store    objectstore.ObjectStore
	capacity int64

	mu      sync.Mutex
	used    int64
	lru     *list.List               // of *cacheItem, most recent first
	items   map[string]*list.Element // key -> element in lru
	loading map[string]*footerLoad

	// Read-ahead (readahead.go).
	aheadBudget, aheadBytes int64
	ahead                   map[aheadKey]*prefetch
	aheadLRU                *list.List // of *prefetch, newest first

	hits, misses            atomic.Int64
	aheadStarted, aheadHits atomic.Int64
	aheadCached             atomic.Int64   // read-aheads not started: the span was in memory
	footersAhead            atomic.Int64   // FooterAhead loads started
	footersAheadWG          sync.WaitGroup // FooterAhead goroutines (tests wait for them)
}

type cacheItem struct {
	key  string
	f    *Footer
	size int64
}

// footerLoad is one footer GET in flight; waiters block on done.
type footerLoad struct {
	done chan struct{}
	f    *Footer
	err  error
}

// ReaderStats are a Reader's cache counters.
type ReaderStats struct {
	// Hits and Misses count footer lookups served from the cache and
	// fetched from the store.
	Hits, Misses int64
	// Footers and Bytes are what the cache holds now.
	Footers int
	Bytes   int64
	// ReadAheads counts prefetches started, ReadAheadHits those a Read
	// used, ReadAheadBytes the bytes prefetched and not yet claimed.
	ReadAheads, ReadAheadHits int64
	ReadAheadBytes            int64
	// ReadAheadsCached counts read-aheads not started because the store
	// said the span was in memory already (objectstore.CacheProber).
	ReadAheadsCached int64
	// FootersAhead counts footer loads started by FooterAhead.
	FootersAhead int64
}

// NewReader returns a Reader over store whose footer cache holds at most
// cacheBytes (estimated in-memory size; a footer costs about 32 bytes per
// block, ~8 KiB for a 16 MiB object of 64 KiB blocks). cacheBytes <= 0
// disables caching: every read then fetches its footer.
func NewReader(store objectstore.ObjectStore, cacheBytes int64) *Reader {
	return &Reader{
		store:    store,
		capacity: cacheBytes,
		lru:      list.New(),
		items:    make(map[string]*list.Element),
		loading:  make(map[string]*footerLoad),
		ahead:    make(map[aheadKey]*prefetch),
		aheadLRU: list.New(),
	}
}

// Read returns the entries of the object at key (described by info, as its
// metadata record says) from the one holding offset from onward, about
// maxBytes of them (whole blocks; at least the block holding from). Every
// returned byte passed its checksums; payloads are freshly fetched and
// never reused, so callers may keep them.
//
// Errors: ErrOutOfRange (from outside [info.Start, info.End)), ErrNotFound
// (no object at key), ErrCorrupt (the object does not match info or fails
// a checksum), or the store's error (a transient failure: retry).
func (r *Reader) Read(ctx context.Context, key string, info Info, from int64, maxBytes int) ([]Entry, error) {
	entries, _, err := r.read(ctx, key, info, from, maxBytes, 0, maxBytes, false)
	return entries, err
}

// ReadLimit is Read for a caller that keeps at most maxEntries entries
// (maxEntries <= 0: no bound): the span fetched stops once it holds that
// many (Footer.SpanEntries), so the bytes fetched and verified follow what
// the caller will use. It may still return more than maxEntries entries
// (whole blocks); the caller drops the rest.
func (r *Reader) ReadLimit(ctx context.Context, key string, info Info, from int64, maxBytes, maxEntries int) ([]Entry, error) {
	entries, _, err := r.read(ctx, key, info, from, maxBytes, maxEntries, maxBytes, false)
	return entries, err
}

// ReadLimitNext is ReadLimit for a sequential reader whose next Read will
// ask for nextBytes (a catch-up whose read budget this part only finishes:
// the span read ahead is the one that next Read fetches, not one of this
// part's remaining budget).
func (r *Reader) ReadLimitNext(ctx context.Context, key string, info Info, from int64, maxBytes, maxEntries, nextBytes int) ([]Entry, error) {
	entries, _, err := r.read(ctx, key, info, from, maxBytes, maxEntries, nextBytes, false)
	return entries, err
}

// ReadPooled is ReadLimit into a recycled buffer: the payloads (and the
// entries slice) belong to the returned Buffer, which the caller must
// Release once it no longer uses any of them (and must not touch them
// after). The Buffer is nil when the
// read did not use one (a store without objectstore.RangeReader, a span
// served from read-ahead): the payloads are then fresh, as Read's.
func (r *Reader) ReadPooled(ctx context.Context, key string, info Info, from int64, maxBytes, maxEntries int) ([]Entry, *Buffer, error) {
	return r.read(ctx, key, info, from, maxBytes, maxEntries, maxBytes, true)
}

// ReadPooledNext is ReadPooled with ReadLimitNext's nextBytes.
func (r *Reader) ReadPooledNext(ctx context.Context, key string, info Info, from int64, maxBytes, maxEntries, nextBytes int) ([]Entry, *Buffer, error) {
	return r.read(ctx, key, info, from, maxBytes, maxEntries, nextBytes, true)
}

func (r *Reader) read(ctx context.Context, key string, info Info, from int64, maxBytes, maxEntries, nextBytes int, pooled bool) ([]Entry, *Buffer, error) {
	if from < info.Start || from >= info.End {
		return nil, nil, fmt.Errorf("%w: offset %d, generation covers [%d, %d)", ErrOutOfRange, from, info.Start, info.End)
	}
	f, err := r.Footer(ctx, key, info)
	if err != nil {
		return nil, nil, err
	}
	off, n, err := f.SpanEntries(from, maxBytes, maxEntries)
	if err != nil {
		return nil, nil, err
	}
	if maxEntries > 0 && nextBytes > 0 {
		if _, whole, _ := f.Span(from, maxBytes); whole > n {
			// The entry bound cut the span: the Read ends inside it and
			// the next one starts there, not where the span ends (the
			// caller's own read-ahead, which knows where, covers it).
			nextBytes = 0
		}
	}
	return r.readSpan(ctx, key, f, off, n, from, nextBytes, pooled)
}

// readSpan returns the verified entries of span [off, off+n) of key that
// end after from: from a prefetch of the span's start if there is one (its
// bytes past n stay prefetched for the next Read; a prefetch shorter than
// n is completed with one GET of the rest), else with one GET (into a
// pooled buffer when pooled and the store can read into one). With
// read-ahead on, the span that follows (a Read of maxBytes from where this
// one ends; maxBytes is that Read's budget) is started once this span's bytes are in hand and before they
// are verified, so the store works on it while this one is decoded.
func (r *Reader) readSpan(ctx context.Context, key string, f *Footer, off, n, from int64, maxBytes int, pooled bool) ([]Entry, *Buffer, error) {
	raw, pbuf, ok, err := r.takeAhead(ctx, key, f.info, off)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		var buf *Buffer
		if _, into := r.store.(objectstore.RangeReader); pooled && into {
			buf = getBuffer(n)
		}
		if _, pieces := r.store.(objectstore.PieceReader); pieces {
			entries, err := r.getDecoded(ctx, key, f, off, n, from, buf, func() { r.aheadAfter(ctx, key, f, off+n, maxBytes) })
			if err != nil {
				buf.Release()
				return nil, nil, err
			}
			return entries, buf, nil
		}
		raw, err = r.get(ctx, key, off, n, buf)
		if err != nil {
			buf.Release()
			return nil, nil, err
		}
		r.aheadAfter(ctx, key, f, off+n, maxBytes)
		return decodeInto(f, raw, off, from, buf)
	}
	got := int64(len(raw))
	if got > n {
		// The rest is kept for the next Read in a share of the
		// prefetch's buffer: recycled once both Reads are done with it.
		r.keepAhead(key, f.info, off+n, raw[n:got:got], pbuf.share())
		raw, got = raw[:n:n], n
	}
	if got == n {
		r.aheadAfter(ctx, key, f, off+n, maxBytes)
		if !pooled {
			pbuf = nil // the caller keeps the payloads: never recycled
		}
		return decodeInto(f, raw, off, from, pbuf)
	}
	rest, err := r.get(ctx, key, off+got, n-got, nil)
	if err != nil {
		return nil, nil, err
	}
	r.aheadAfter(ctx, key, f, off+n, maxBytes)
	entries, err := DecodeSpan(f, raw, off, from)
	if err != nil {
		return nil, nil, err
	}
	more, err := DecodeSpan(f, rest, off+got, from)
	if err != nil {
		return nil, nil, err
	}
	return append(entries, more...), nil, nil
}

// decodeInto decodes span raw at off (from buf's bytes when buf is
// non-nil, reusing its entries slice); on an error buf is released.
func decodeInto(f *Footer, raw []byte, off, from int64, buf *Buffer) ([]Entry, *Buffer, error) {
	var reuse []Entry
	if buf != nil {
		reuse = buf.entries
	}
	entries, err := decodeSpanAppend(f, raw, off, from, reuse)
	if err != nil {
		buf.Release()
		return nil, nil, err
	}
	if buf != nil {
		buf.entries = entries
	}
	return entries, buf, nil
}

// get is one ranged GET of [off, off+n) of key, which must return exactly
// n bytes (fewer means the object is not what its footer says). The store
// is told the caller verifies (every byte get returns goes through
// DecodeSpan's entry and block CRCs before anything is served), so fsstore
// skips its own block CRCs: one checksum pass per byte, not two. With buf
// the bytes land in it; otherwise in a fresh slice.
func (r *Reader) get(ctx context.Context, key string, off, n int64, buf *Buffer) ([]byte, error) {
	raw, err := r.fetch(ctx, key, off, n, buf)
	if err != nil {
		err = readStoreError(key, err)
		if isNotFound(err) {
			r.Forget(key)
		}
		return nil, err
	}
	if int64(len(raw)) != n {
		return nil, corrupt(fmt.Sprintf("%s: read %d bytes at %d, the footer says %d (truncated object)", key, len(raw), off, n))
	}
	return raw, nil
}

// verifyPiece is the piece size of getDecoded's reads: small enough that
// the piece just copied is still in the CPU's cache when it is checked and
// that the device has the next pieces to read meanwhile, large enough that
// the extra preads cost nothing measurable (32 per 16 MiB span). 512 KiB
// read a cold 1 KiB-entry backlog ~7 % faster than 1 MiB, 2 MiB and
// 256 KiB did, and 16 KiB entries as fast (docs/notes/issue-9.md,
// session 18).
const verifyPiece = 512 << 10

// getDecoded is get and DecodeSpan in one pass, for a store that reads a
// range in pieces (objectstore.PieceReader): [off, off+n) of key is read
// piece by piece through one open, and each block is checked as soon as
// its bytes are in, while the store reads the next piece. A checksum
// failure stops the read there (ErrCorrupt; nothing is returned); so does
// a store error. The entries are returned only once every block of the
// span was read and checked, exactly as get then DecodeSpan would return
// them. read is called once every byte is read, before the last blocks are
// checked (where get's caller starts its read-ahead). With buf the bytes
// land in it and its entries slice is reused.
func (r *Reader) getDecoded(ctx context.Context, key string, f *Footer, off, n, from int64, buf *Buffer, read func()) ([]Entry, error) {
	var dst []byte
	var reuse []Entry
	if buf != nil {
		dst, reuse = buf.b[:n:n], buf.entries
	} else {
		dst = make([]byte, n)
	}
	d, err := newSpanDecoder(f, off, n, from, reuse)
	if err != nil {
		return nil, err
	}
	var decodeErr error
	got, err := objectstore.ReadRangePieces(ctx, r.store, key, off, dst, verifyPiece, objectstore.ReadRangeOptions{CallerVerifies: true}, func(m int) error {
		if int64(m) == n {
			read()
		}
		decodeErr = d.filled(dst[:m])
		return decodeErr
	})
	switch {
	case decodeErr != nil:
		return nil, decodeErr
	case err != nil:
		err = readStoreError(key, err)
		if isNotFound(err) {
			r.Forget(key)
		}
		return nil, err
	case int64(got) != n:
		return nil, corrupt(fmt.Sprintf("%s: read %d bytes at %d, the footer says %d (truncated object)", key, got, off, n))
	}
	entries, err := d.finish()
	if err != nil {
		return nil, err
	}
	if buf != nil {
		buf.entries = entries
	}
	return entries, nil
}

// fetch reads [off, off+n) of key for DecodeSpan: with ReadRange when the
// store has it (into buf, or a fresh slice), else with GetRange.
func (r *Reader) fetch(ctx context.Context, key string, off, n int64, buf *Buffer) ([]byte, error) {
	rr, ok := r.store.(objectstore.RangeReader)
	if !ok {
		return r.store.GetRange(ctx, key, off, n)
	}
	var dst []byte
	if buf != nil {
		dst = buf.b[:n:n]
	} else {
		dst = make([]byte, n)
	}
	k, err := rr.ReadRange(ctx, key, off, dst, objectstore.ReadRangeOptions{CallerVerifies: true})
	if err != nil {
		return nil, err
	}
	return dst[:k:k], nil
}

func (r *Reader) readAheadOn() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.aheadBudget > 0
}

// Footer returns the verified footer of the object at key, from the cache or
// with one ranged GET (which also proves the object at key is the one info
// describes: its digest and every field must match).
func (r *Reader) Footer(ctx context.Context, key string, info Info) (*Footer, error) {
	waited := false
	for {
		r.mu.Lock()
		if el, ok := r.items[key]; ok {
			it := el.Value.(*cacheItem)
			if it.f.info == info {
				r.lru.MoveToFront(el)
				r.mu.Unlock()
				r.hits.Add(1)
				return it.f, nil
			}
		}
		if l, ok := r.loading[key]; ok && !waited {
			r.mu.Unlock()
			select {
			case <-l.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if l.err == nil && l.f.info == info {
				r.hits.Add(1)
				return l.f, nil
			}
			// The shared load failed or was for another Info: load
			// ourselves (once), so one caller's error is not everyone's.
			waited = true
			continue
		}
		l := &footerLoad{done: make(chan struct{})}
		shared := !waited
		if shared {
			r.loading[key] = l
		}
		r.mu.Unlock()

		r.misses.Add(1)
		l.f, l.err = r.fetchFooter(ctx, key, info)
		r.mu.Lock()
		if shared {
			delete(r.loading, key)
		}
		if l.err == nil {
			r.insertLocked(key, l.f)
		} else if isNotFound(l.err) {
			r.removeLocked(key)
		}
		r.mu.Unlock()
		close(l.done)
		return l.f, l.err
	}
}

func (r *Reader) fetchFooter(ctx context.Context, key string, info Info) (*Footer, error) {
	if info.FooterLength < metaLen+blockRecLen+trailerLen || info.FooterOffset < headerLen ||
		info.FooterOffset+info.FooterLength != info.Size {
		return nil, corrupt(fmt.Sprintf("metadata for %s locates no footer (offset %d, length %d, size %d)",
			key, info.FooterOffset, info.FooterLength, info.Size))
	}
	raw, err := r.store.GetRange(ctx, key, info.FooterOffset, info.FooterLength)
	if err != nil {
		return nil, readStoreError(key, err)
	}
	f, err := ParseFooter(raw, info)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return f, nil
}

// Forget drops key's footer from the cache (call it when the object is
// retired or deleted).
func (r *Reader) Forget(key string) {
	r.mu.Lock()
	r.removeLocked(key)
	r.forgetAheadLocked(key)
	r.mu.Unlock()
}

// Stats returns the cache counters.
func (r *Reader) Stats() ReaderStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ReaderStats{Hits: r.hits.Load(), Misses: r.misses.Load(), Footers: len(r.items), Bytes: r.used,
		ReadAheads: r.aheadStarted.Load(), ReadAheadHits: r.aheadHits.Load(), ReadAheadBytes: r.aheadBytes,
		ReadAheadsCached: r.aheadCached.Load(), FootersAhead: r.footersAhead.Load()}
}

func (r *Reader) insertLocked(key string, f *Footer) {
	r.removeLocked(key)
	size := f.memSize() + int64(len(key))
	if size > r.capacity {
		return
	}
	for r.used+size > r.capacity {
		r.removeLocked(r.lru.Back().Value.(*cacheItem).key)
	}
	r.items[key] = r.lru.PushFront(&cacheItem{key: key, f: f, size: size})
	r.used += size
}

func (r *Reader) removeLocked(key string) {
	if el, ok := r.items[key]; ok {
		r.used -= el.Value.(*cacheItem).size
		r.lru.Remove(el)
		delete(r.items, key)
	}
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
