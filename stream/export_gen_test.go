package stream

import (
	"context"
	"fmt"

	"github.com/nereusstream/nereus-go/metadata"
)

// GenRanges returns the [start, end) of stream id's generation-index
// records in key order (for tests outside the package).
func GenRanges(ctx context.Context, meta metadata.Store, id ID) ([][2]int64, error) {
	ds, err := indexRecordsUnder(ctx, meta, genPrefix(id))
	if err != nil {
		return nil, err
	}
	out := make([][2]int64, 0, len(ds))
	for _, d := range ds {
		out = append(out, [2]int64{d.Start, d.End})
	}
	return out, nil
}

// NamedGenObjects returns the generation object keys stream id's
// generation records and retire journal name (for tests).
func NamedGenObjects(ctx context.Context, meta metadata.Store, id ID) (map[string]bool, error) {
	named := map[string]bool{}
	recs, err := meta.RangeScan(ctx, genPrefix(id), genPrefix(id)+"\xff", 0)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		d, err := decodeIndexRecord(r.Value)
		if err != nil {
			return nil, err
		}
		for _, k := range genKeysOf(d) {
			named[k] = true
		}
	}
	journal, err := meta.RangeScan(ctx, retirePrefix(id), retirePrefix(id)+"\xff", 0)
	if err != nil {
		return nil, err
	}
	for _, r := range journal {
		rr, err := decodeRetire(r.Value)
		if err != nil {
			return nil, err
		}
		named[rr.ObjectKey] = true
	}
	return named, nil
}

// MergeWindow snapshots the generation records of stream id that end at
// ends — a merge window, as considerMerges plans one — and returns the merge
// task of exactly that window, to run later: a plan made before another
// process's merge and carried out after it (for tests).
func (c *Core) MergeWindow(ctx context.Context, id ID, ends ...int64) (func(context.Context) error, error) {
	srcs := make([]mergeSource, 0, len(ends))
	for _, e := range ends {
		rec, err := c.meta.Get(ctx, genKey(id, e))
		if err != nil {
			return nil, err
		}
		d, err := decodeIndexRecord(rec.Value)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, mergeSource{key: rec.Key, version: rec.Version, d: d})
	}
	return func(ctx context.Context) error { return c.mergeGenerations(ctx, id, srcs) }, nil
}

// DebugIndexState renders stream id's stored head frontiers, generation
// records and offset-index records (for a test's failure message).
func DebugIndexState(ctx context.Context, meta metadata.Store, c *Core, id ID) string {
	var b []byte
	if rec, err := meta.Get(ctx, headKey(id)); err == nil {
		if h, err := decodeHead(rec.Value); err == nil {
			b = fmt.Appendf(b, "stored head v%d: start %d end %d genThrough %d genIndexed %d indexed %d nextGen %d genPending %d pending %d\n",
				rec.Version, h.Start, h.End, h.GenThrough, h.GenIndexedThrough, h.IndexedThrough, h.NextGen, len(h.GenPending), len(h.Pending))
			for _, d := range h.GenPending {
				b = fmt.Appendf(b, "  genPending [%d,%d)\n", d.Start, d.End)
			}
		}
	}
	if c != nil {
		if h, v, err := c.readHeadView(ctx, id); err == nil {
			b = fmt.Appendf(b, "view head v%d: start %d end %d genThrough %d genIndexed %d indexed %d nextGen %d genPending %d pending %d\n",
				v, h.Start, h.End, h.GenThrough, h.GenIndexedThrough, h.IndexedThrough, h.NextGen, len(h.GenPending), len(h.Pending))
		}
	}
	for _, p := range []string{genPrefix(id), indexPrefix(id)} {
		recs, _ := meta.RangeScan(ctx, p, p+"\xff", 0)
		b = fmt.Appendf(b, "%s:", p)
		for _, r := range recs {
			if d, err := decodeIndexRecord(r.Value); err == nil {
				b = fmt.Appendf(b, " [%d,%d)g%d", d.Start, d.End, d.Generation)
			}
		}
		b = append(b, '\n')
	}
	if rec, err := meta.Get(ctx, mergeClaimKey(id)); err == nil {
		if cl, err := decodeMergeClaim(rec.Value); err == nil {
			b = fmt.Appendf(b, "merge claim %+v\n", cl)
		}
	}
	return string(b)
}

// GenRecordKeys are the keys of a stream's generation records, in order.
func GenRecordKeys(ctx context.Context, meta metadata.Store, id ID) ([]string, error) {
	recs, err := meta.RangeScan(ctx, genPrefix(id), genPrefix(id)+"\xff", 0)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(recs))
	for i, r := range recs {
		keys[i] = r.Key
	}
	return keys, nil
}

// JournalOrphan writes the retire-journal entry the orphan sweep writes
// for an unnamed generation object (as an older binary's sweep, which
// did not consult merge claims, would have; for tests).
func JournalOrphan(ctx context.Context, meta metadata.Store, id ID, objectKey string, nowMs int64) error {
	rec := retireRecord{ObjectKey: objectKey, End: orphanEnd, SinceMs: nowMs}
	_, err := meta.Put(ctx, retireKey(id, objectKey), rec.encode(), metadata.NotExists)
	return err
}

// IndexSources returns the [start, end) and payload bytes of stream id's
// offset-index records in key order (for tests outside the package).
func IndexSources(ctx context.Context, meta metadata.Store, id ID) ([][3]int64, error) {
	ds, err := indexRecordsUnder(ctx, meta, indexPrefix(id))
	if err != nil {
		return nil, err
	}
	out := make([][3]int64, 0, len(ds))
	for _, d := range ds {
		out = append(out, [3]int64{d.Start, d.End, d.Bytes})
	}
	return out, nil
}

// indexRecordsUnder decodes every index record under prefix, in key order.
func indexRecordsUnder(ctx context.Context, meta metadata.Store, prefix string) ([]descriptor, error) {
	recs, err := meta.RangeScan(ctx, prefix, prefix+"\xff", 0)
	if err != nil {
		return nil, err
	}
	return decodeIndexRecords(recs)
}
