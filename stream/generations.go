package stream

import (
	"context"
	"errors"
	"fmt"

	"github.com/nereusstream/nereus-go/internal/bin"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/stream/generation"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// Generations: read-optimized copies of committed ranges (invariant 3).
//
// Generation 0 is the primary WAL. A generation >= 1 is one object in the
// object store holding a contiguous committed range [Start, End) of one
// stream, the exact entry bytes, in package generation's format. It is
// described by a descriptor like a WAL commit, with Provider
// generationProvider and one part whose target is genTarget (the object key
// and the generation.Info the reader checks the object against).
//
// Publication (materialize.go) is the head CAS that appends the descriptor
// to head.GenPending and advances head.GenThrough — the physical switch
// point; no offset changes. Published descriptors are then written to the
// generation index (s/g/<id>/<end>) and dropped from GenPending by a later
// CAS, exactly as WAL commits move from Pending to the offset index. Reads
// below GenThrough use generations; at and above it, WAL runs. A record in
// the generation index therefore always names a published generation: only
// the head CAS can publish, and records are written after it.

// generationProvider is the descriptor Provider name of generations >= 1.
const generationProvider = "generation"

// genObjectPrefix is where stream id's generation objects live.
func genObjectPrefix(id ID) string { return "gen/" + id.String() + "/" }

// genObjectKey names the object of generation gen of stream id covering
// [start, end). The nonce makes every attempt's key unique, so a retried or
// racing task can never overwrite a published object.
func genObjectKey(id ID, gen uint64, start, end int64, nonce uint64) string {
	return fmt.Sprintf("%s%020d-%020d-g%d-%016x", genObjectPrefix(id), start, end, gen, nonce)
}

const genTargetV1 = 1

// genTarget is a generation part's provider.Target.
type genTarget struct {
	Key string
	generation.Info
}

func (t genTarget) encode() provider.Target {
	w := bin.Writer{}
	w.U8(genTargetV1)
	w.String(t.Key)
	w.U64(t.Stream)
	w.Uvarint(t.Generation)
	w.Varint(t.Start)
	w.Varint(t.End)
	w.Uvarint(uint64(t.Entries))
	w.Varint(t.Bytes)
	w.Varint(t.MinTS)
	w.Varint(t.MaxTS)
	w.Varint(t.Size)
	w.Varint(t.FooterOffset)
	w.Varint(t.FooterLength)
	w.Raw(t.Digest[:])
	return w.Seal()
}

func decodeGenTarget(b provider.Target) (genTarget, error) {
	body, err := bin.Open(b)
	if err != nil {
		return genTarget{}, fmt.Errorf("%w: generation target: %w", ErrCorrupt, err)
	}
	r := bin.Reader{B: body}
	if v := r.U8(); v != genTargetV1 {
		return genTarget{}, fmt.Errorf("%w: generation target version %d", ErrCorrupt, v)
	}
	var t genTarget
	t.Key = r.String()
	t.Stream, t.Generation = r.U64(), r.Uvarint()
	t.Start, t.End = r.Varint(), r.Varint()
	t.Entries = uint32(r.Uvarint())
	t.Bytes, t.MinTS, t.MaxTS = r.Varint(), r.Varint(), r.Varint()
	t.Size, t.FooterOffset, t.FooterLength = r.Varint(), r.Varint(), r.Varint()
	rest := r.Rest()
	if r.Err() != nil || len(rest) != len(t.Digest) || t.Key == "" || t.End <= t.Start {
		return genTarget{}, fmt.Errorf("%w: generation target", ErrCorrupt)
	}
	copy(t.Digest[:], rest)
	return t, nil
}

// genDescriptor describes a built generation object as a descriptor.
func genDescriptor(t genTarget, cumBytes int64, lineage []lineage) descriptor {
	return descriptor{Start: t.Start, End: t.End, Entries: t.Entries, Bytes: t.Bytes, CumBytes: cumBytes,
		MinTS: t.MinTS, MaxTS: t.MaxTS, Generation: uint32(t.Generation), Provider: generationProvider,
		Parts: []part{{Start: t.Start, Target: t.encode()}}, Lineage: lineage}
}

// genReader reads generation parts (partReader) through package
// generation's footer-caching reader.
type genReader struct {
	r *generation.Reader
}

func newGenReader(store objectstore.ObjectStore, cacheBytes int64) *genReader {
	return &genReader{r: generation.NewReader(store, cacheBytes)}
}

func (g *genReader) Read(ctx context.Context, target provider.Target, runStart, from int64, maxBytes int) ([]provider.ReadEntry, error) {
	return g.readLimit(ctx, target, from, maxBytes, 0, maxBytes)
}

// readLimit is Read for a read that keeps at most maxEntries entries
// (<= 0: no bound): the span fetched from the object stops there
// (generation.Reader.ReadLimit), so a read of a few entries does not
// fetch and verify a whole byte budget of them.
// nextBytes is the budget of the reader's next read (its read-ahead
// fetches that read's span).
func (g *genReader) readLimit(ctx context.Context, target provider.Target, from int64, maxBytes, maxEntries, nextBytes int) ([]provider.ReadEntry, error) {
	t, err := decodeGenTarget(target)
	if err != nil {
		return nil, err
	}
	entries, err := g.r.ReadLimitNext(ctx, t.Key, t.Info, max(from, t.Start), max(maxBytes, 1), maxEntries, nextBytes)
	if err != nil {
		return nil, genReadError(t.Key, err)
	}
	out := make([]provider.ReadEntry, len(entries))
	for i, e := range entries {
		out[i] = provider.ReadEntry(e)
	}
	return out, nil
}

// readPooled is readLimit into a recycled buffer (ReadOptions.Recycle),
// which it adds to rb; the entries (slice and payloads) belong to that
// buffer.
func (g *genReader) readPooled(ctx context.Context, target provider.Target, from int64, maxBytes, maxEntries, nextBytes int, rb *readBuffers) ([]generation.Entry, error) {
	t, err := decodeGenTarget(target)
	if err != nil {
		return nil, err
	}
	entries, buf, err := g.r.ReadPooledNext(ctx, t.Key, t.Info, max(from, t.Start), max(maxBytes, 1), maxEntries, nextBytes)
	if err != nil {
		return nil, genReadError(t.Key, err)
	}
	rb.add(buf)
	return entries, nil
}

func genReadError(key string, err error) error {
	switch {
	case errors.Is(err, generation.ErrNotFound):
		return fmt.Errorf("%w: generation object %s: %w", provider.ErrNotFound, key, err)
	case errors.Is(err, generation.ErrCorrupt):
		return fmt.Errorf("%w: generation object %s: %w", provider.ErrCorrupt, key, err)
	}
	return err
}

func (g *genReader) forget(key string) { g.r.Forget(key) }

// readAhead starts fetching what a sequential reader's next read from
// offset next with maxBytes will want, when that lies in generations
// (runs are the sources the read just used, in offset order): the span of
// the generation holding next and, if that span ends the object, the
// start of the following generation for the rest of the budget. Byte
// budgets are estimates (payload bytes, not object bytes); the Reader uses
// a prefetch that is too long or too short all the same.
func (g *genReader) readAhead(ctx context.Context, runs []descriptor, next int64, maxBytes int) {
	budget := maxBytes
	for _, d := range runs {
		if d.End <= next || budget <= 0 {
			continue
		}
		if d.Provider != generationProvider || d.Start > next || len(d.Parts) != 1 {
			return
		}
		t, err := decodeGenTarget(d.Parts[0].Target)
		if err != nil {
			return
		}
		g.r.Prefetch(ctx, t.Key, t.Info, next, budget)
		if rest := t.Bytes * (t.End - next) / max(t.End-t.Start, 1); rest < int64(budget) {
			budget -= int(rest)
		} else {
			return
		}
		next = d.End
	}
}
