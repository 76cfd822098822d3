package stream

import (
	"context"

	"github.com/nereusstream/nereus-go/metadata"
)

// GenRanges returns the [start, end) of stream id's generation-index
// records in key order (for tests outside the package).
func GenRanges(ctx context.Context, meta metadata.Store, id ID) ([][2]int64, error) {
	recs, err := meta.RangeScan(ctx, genPrefix(id), genPrefix(id)+"\xff", 0)
	if err != nil {
		return nil, err
	}
	out := make([][2]int64, 0, len(recs))
	for _, r := range recs {
		d, err := decodeIndexRecord(r.Value)
		if err != nil {
			return nil, err
		}
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
