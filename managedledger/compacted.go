package managedledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/nereusstream/nereus-go/stream"
)

// CompactViewKind is the view kind of compacted Pulsar topics (the core's
// lossy read view, stream/view.go): below its horizon a topic read with
// readCompacted sees the view, at and above it the ledger itself.
const CompactViewKind = "pulsar-compact"

// ErrNoViews: the storage keeps no views (compaction is not available).
var ErrNoViews = errors.New("nereus/managedledger: storage keeps no compacted views")

func (l *Ledger) views() (stream.Views, bool) {
	v, ok := l.f.storage.(stream.Views)
	return v, ok
}

// ReadCompacted is Read through the compacted view: entries (or messages
// of a batch, marked compacted out) that compaction removed are skipped;
// offsets are the ledger's. Without a view it is Read.
func (l *Ledger) ReadCompacted(ctx context.Context, from int64, maxEntries, maxBytes int) ([]Entry, int64, error) {
	v, ok := l.views()
	if !ok {
		return l.Read(ctx, from, maxEntries, maxBytes)
	}
	opts := stream.ReadOptions{MaxEntries: maxEntries, MaxBytes: maxBytes}
	res, err := v.ReadView(ctx, l.id, CompactViewKind, from, opts)
	if errors.Is(err, stream.ErrOffsetOutOfRange) && from < res.StartOffset {
		res, err = v.ReadView(ctx, l.id, CompactViewKind, res.StartOffset, opts)
	}
	if err != nil {
		return nil, from, err
	}
	out := make([]Entry, len(res.Entries))
	for i, e := range res.Entries {
		out[i] = toEntry(e)
	}
	return out, res.Next, nil
}

// Compact runs one compaction pass up to the ledger's current end with cmp.
func (l *Ledger) Compact(ctx context.Context, cmp stream.Compactor) (stream.CompactionStats, error) {
	v, ok := l.views()
	if !ok {
		return stream.CompactionStats{}, ErrNoViews
	}
	_, end, err := l.Bounds(ctx)
	if err != nil {
		return stream.CompactionStats{}, err
	}
	st, err := v.Compact(ctx, l.id, CompactViewKind, end, cmp)
	if err != nil {
		return st, fmt.Errorf("compacting %s: %w", l.name, err)
	}
	return st, nil
}

// CompactedView describes the topic's compacted view.
func (l *Ledger) CompactedView(ctx context.Context) (stream.ViewInfo, error) {
	v, ok := l.views()
	if !ok {
		return stream.ViewInfo{Kind: CompactViewKind}, nil
	}
	return v.DescribeView(ctx, l.id, CompactViewKind)
}
