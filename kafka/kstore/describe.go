package kstore

import (
	"context"

	"github.com/nereusstream/nereus-go/stream"
)

// Describe returns the partition stream's current head (offsets, retained
// bytes, profile): what DescribeLogDirs reports.
func (s *Store) Describe(ctx context.Context, p *Partition) (stream.Info, error) {
	if p.proj != nil {
		return stream.Info{}, notOnProjected("log dirs (a Pulsar topic's storage is described by pulsar-admin topics stats)")
	}
	return s.streams.Describe(ctx, p.StreamID)
}

// Size is what the partition occupies for its readers: the stream's
// retained payload plus, on a compacted topic, its compacted view's (on a
// compact-only topic the view is all that is left below the cleaned
// point).
func (s *Store) Size(ctx context.Context, p *Partition) (int64, error) {
	info, err := s.Describe(ctx, p)
	if err != nil {
		return 0, err
	}
	size := info.RetainedBytes
	if v, ok := s.views(); ok && p.compacted {
		vi, err := v.DescribeView(ctx, p.StreamID, CompactViewKind)
		if err != nil {
			return 0, err
		}
		size += vi.Bytes
	}
	return size, nil
}
