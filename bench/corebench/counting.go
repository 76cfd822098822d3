package corebench

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/objectstore"
)

// countingStore counts object PUTs.
type countingStore struct {
	objectstore.ObjectStore
	puts atomic.Int64
}

func (c *countingStore) Put(ctx context.Context, key string, data []byte, opts objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	c.puts.Add(1)
	return c.ObjectStore.Put(ctx, key, data, opts)
}

// countingMeta counts what the core asks of the metadata store, by kind
// and by key family (the stream core's key prefixes "s/h/" for heads and
// "s/i/" for offset-index entries), so a run shows where per-stream
// metadata cost goes: how many head writes, how many bytes each, how many
// reads the background passes do.
type countingMeta struct {
	metadata.Store
	c metaCounts
}

// metaCounts are cumulative counters; a run reports the difference over
// its measured window.
type metaCounts struct {
	batches, batchOps         atomic.Int64
	headPuts, headPutBytes    atomic.Int64
	indexPuts, indexPutBytes  atomic.Int64
	otherPuts, deletes, reads atomic.Int64
	scans, scannedRecords     atomic.Int64
}

// MetaCounts is a snapshot of countingMeta's counters.
type MetaCounts struct {
	Batches, BatchOps        int64
	HeadPuts, HeadPutBytes   int64
	IndexPuts, IndexPutBytes int64
	OtherPuts, Deletes       int64
	Reads                    int64 // point reads (Get, and Gets in batches)
	Scans, ScannedRecords    int64
}

func (c *metaCounts) snapshot() MetaCounts {
	return MetaCounts{
		Batches: c.batches.Load(), BatchOps: c.batchOps.Load(),
		HeadPuts: c.headPuts.Load(), HeadPutBytes: c.headPutBytes.Load(),
		IndexPuts: c.indexPuts.Load(), IndexPutBytes: c.indexPutBytes.Load(),
		OtherPuts: c.otherPuts.Load(), Deletes: c.deletes.Load(), Reads: c.reads.Load(),
		Scans: c.scans.Load(), ScannedRecords: c.scannedRecords.Load(),
	}
}

func (a MetaCounts) sub(b MetaCounts) MetaCounts {
	return MetaCounts{
		Batches: a.Batches - b.Batches, BatchOps: a.BatchOps - b.BatchOps,
		HeadPuts: a.HeadPuts - b.HeadPuts, HeadPutBytes: a.HeadPutBytes - b.HeadPutBytes,
		IndexPuts: a.IndexPuts - b.IndexPuts, IndexPutBytes: a.IndexPutBytes - b.IndexPutBytes,
		OtherPuts: a.OtherPuts - b.OtherPuts, Deletes: a.Deletes - b.Deletes, Reads: a.Reads - b.Reads,
		Scans: a.Scans - b.Scans, ScannedRecords: a.ScannedRecords - b.ScannedRecords,
	}
}

func (c *metaCounts) put(key string, n int) {
	switch {
	case strings.HasPrefix(key, "s/h/"):
		c.headPuts.Add(1)
		c.headPutBytes.Add(int64(n))
	case strings.HasPrefix(key, "s/i/"):
		c.indexPuts.Add(1)
		c.indexPutBytes.Add(int64(n))
	default:
		c.otherPuts.Add(1)
	}
}

func (m *countingMeta) Get(ctx context.Context, key string) (metadata.Record, error) {
	m.c.reads.Add(1)
	return m.Store.Get(ctx, key)
}

func (m *countingMeta) Put(ctx context.Context, key string, value []byte, expected metadata.Version) (metadata.Version, error) {
	m.c.put(key, len(value))
	return m.Store.Put(ctx, key, value, expected)
}

func (m *countingMeta) Delete(ctx context.Context, key string, expected metadata.Version) error {
	m.c.deletes.Add(1)
	return m.Store.Delete(ctx, key, expected)
}

func (m *countingMeta) RangeScan(ctx context.Context, min, max string, limit int) ([]metadata.Record, error) {
	recs, err := m.Store.RangeScan(ctx, min, max, limit)
	m.c.scans.Add(1)
	m.c.scannedRecords.Add(int64(len(recs)))
	return recs, err
}

func (m *countingMeta) Batch(ctx context.Context, ops []metadata.Op) ([]metadata.Result, error) {
	m.c.batches.Add(1)
	m.c.batchOps.Add(int64(len(ops)))
	for _, op := range ops {
		switch op.Kind {
		case metadata.OpPut:
			m.c.put(op.Key, len(op.Value))
		case metadata.OpDelete:
			m.c.deletes.Add(1)
		case metadata.OpGet:
			m.c.reads.Add(1)
		}
	}
	return m.Store.Batch(ctx, ops)
}
