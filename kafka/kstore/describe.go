package kstore

import (
	"context"

	"github.com/nereusstream/nereus-go/stream"
)

// Describe returns the partition stream's current head (offsets, retained
// bytes, profile): what DescribeLogDirs reports.
func (s *Store) Describe(ctx context.Context, p *Partition) (stream.Info, error) {
	return s.streams.Describe(ctx, p.StreamID)
}
