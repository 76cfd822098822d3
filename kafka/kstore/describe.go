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
