package stream

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream/provider"
)

// The oracle: what was committed, independent of what GC later deleted.
//
// Every applied metadata write is observed (simMeta.observe). A WAL run is
// committed iff a stored head ever listed it in Pending or an offset-index
// record ever named it (the head CAS is the commit point; the index only
// ever receives committed runs). The oracle keeps every such descriptor and
// reads their bytes from the simulated disks, deleted or not, so a seed's
// committed history stays known after retention trimmed it and GC deleted
// its segments; the auditor's reads through the core are compared with it.
// Every generation ever published (in a stored head's GenPending or a
// generation-index record) is kept too: the "nothing published twice" and
// "GC never deletes what is needed" checks use them.
type simOracle struct {
	committed map[ID]map[string]descriptor // stream -> "start-end" -> WAL descriptor
	published map[ID]map[string]descriptor // stream -> generation object key -> descriptor
	// materialized: the generations published by materialization (through
	// a head's GenPending; merges switch index records instead)
	materialized map[ID]map[string]descriptor
	lastStart    map[ID]int64
	onTrim       func(id ID, start int64) // a stored head's Start moved up
	tracef       func(format string, args ...any)
}

func newSimOracle() *simOracle {
	return &simOracle{committed: map[ID]map[string]descriptor{}, published: map[ID]map[string]descriptor{},
		materialized: map[ID]map[string]descriptor{}, lastStart: map[ID]int64{}}
}

// observe is called for every applied Put of key with value.
func (o *simOracle) observe(key string, value []byte) {
	switch {
	case strings.HasPrefix(key, headKeyPrefix):
		h, err := decodeHead(value)
		if err != nil {
			return
		}
		for _, d := range h.Pending {
			o.commit(h.ID, d)
		}
		for _, d := range h.GenPending {
			o.publish(h.ID, d)
			o.materialize(h.ID, d)
		}
		if h.Start > o.lastStart[h.ID] {
			o.lastStart[h.ID] = h.Start
			if o.onTrim != nil {
				o.onTrim(h.ID, h.Start)
			}
		}
	case strings.HasPrefix(key, indexKeyPrefix), strings.HasPrefix(key, genKeyPrefix):
		d, err := decodeIndexRecord(value)
		if err != nil {
			return
		}
		id, ok := parseHeadKey(headKeyPrefix + key[len(indexKeyPrefix):len(indexKeyPrefix)+16])
		if !ok {
			return
		}
		if strings.HasPrefix(key, genKeyPrefix) {
			o.publish(id, d)
		} else {
			o.commit(id, d)
		}
	}
}

func (o *simOracle) commit(id ID, d descriptor) {
	if d.Generation > 0 {
		return
	}
	m := o.committed[id]
	if m == nil {
		m = map[string]descriptor{}
		o.committed[id] = m
	}
	m[fmt.Sprintf("%d-%d", d.Start, d.End)] = d
}

func (o *simOracle) publish(id ID, d descriptor) {
	m := o.published[id]
	if m == nil {
		m = map[string]descriptor{}
		o.published[id] = m
	}
	for _, pt := range d.Parts {
		if gt, err := decodeGenTarget(pt.Target); err == nil {
			if _, ok := m[gt.Key]; !ok && o.tracef != nil {
				o.tracef("oracle: generation %s [%d,%d) of %v published", gt.Key, d.Start, d.End, id)
			}
			m[gt.Key] = d
		}
	}
}

func (o *simOracle) materialize(id ID, d descriptor) {
	m := o.materialized[id]
	if m == nil {
		m = map[string]descriptor{}
		o.materialized[id] = m
	}
	for _, pt := range d.Parts {
		if gt, err := decodeGenTarget(pt.Target); err == nil {
			m[gt.Key] = d
		}
	}
}

// wasPublished reports whether generation object key was ever published.
func (o *simOracle) wasPublished(id ID, key string) (descriptor, bool) {
	d, ok := o.published[id][key]
	return d, ok
}

// isCommitted reports whether a WAL run of stream id [start, end) with
// the given session and commit number was ever committed.
func (o *simOracle) isCommitted(id ID, epoch, token, commit uint64, start, end int64) bool {
	for _, d := range o.committed[id] {
		if d.Epoch == epoch && d.Token == token && d.FirstCommit <= commit && commit <= d.Commit && d.Start <= start && end <= d.End {
			return true
		}
	}
	return false
}

// log renders stream id's committed history [0, end) from the raw disks,
// in the model's entry format; an error names the first gap, overlap or
// lost run. Descriptors are taken apart into their runs (parts): the
// index may hold one record for several consecutive commits that the
// head's Pending listed one by one.
func (o *simOracle) log(id ID, end int64, rawRun func(prov string, target []byte, start int64) (provider.Run, bool)) (string, error) {
	type runPart struct {
		start, end int64
		provider   string
		target     string
	}
	seen := map[string]bool{}
	var parts []runPart
	for _, d := range o.committed[id] {
		for i, pt := range d.Parts {
			rp := runPart{pt.Start, d.partEnd(i), d.Provider, string(pt.Target)}
			k := fmt.Sprintf("%d-%d-%s-%x", rp.start, rp.end, rp.provider, rp.target)
			if !seen[k] {
				seen[k] = true
				parts = append(parts, rp)
			}
		}
	}
	slices.SortFunc(parts, func(a, b runPart) int { return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.end, b.end)) })
	var b strings.Builder
	next := int64(0)
	for _, rp := range parts {
		if rp.start != next {
			return "", fmt.Errorf("committed history of %v has a gap or overlap at %d (next run [%d, %d)): two runs committed for one offset, or none", id, next, rp.start, rp.end)
		}
		run, ok := rawRun(rp.provider, []byte(rp.target), rp.start)
		if !ok || run.Start != rp.start {
			return "", fmt.Errorf("committed run [%d, %d) of %v (provider %q) was never durable", rp.start, rp.end, id, rp.provider)
		}
		off := run.Start
		for _, e := range run.Entries {
			b.WriteString(entryString(string(e.Payload), off, e.RecordCount))
			off += int64(e.RecordCount)
		}
		if off != rp.end {
			return "", fmt.Errorf("committed run of %v ends at %d, its descriptor at %d", id, off, rp.end)
		}
		next = rp.end
	}
	if next != end {
		return "", fmt.Errorf("committed history of %v ends at %d, its head at %d", id, next, end)
	}
	return b.String(), nil
}

// checkPublishedOnce: the generation objects ever published for a stream
// (by materialization or by a merge) cover disjoint ranges, except that a
// merged one covers the sources it supersedes: containment is allowed; a
// partial overlap, or two objects for exactly one range, means a range was
// published twice. Materializations alone must be disjoint (a range
// materialized twice). Seed 3184 of the mixed run once published [7,26)
// and [5,25) by two processes' merges; merge claims (merge_claim.go) made
// that impossible and this check strict again.
func (o *simOracle) checkPublishedOnce(id ID) error {
	type span struct {
		key        string
		start, end int64
	}
	spansOf := func(m map[string]descriptor) []span {
		var spans []span
		for k, d := range m {
			spans = append(spans, span{k, d.Start, d.End})
		}
		slices.SortFunc(spans, func(a, b span) int { return cmp.Or(cmp.Compare(a.start, b.start), strings.Compare(a.key, b.key)) })
		return spans
	}
	mat := spansOf(o.materialized[id])
	for i := 1; i < len(mat); i++ {
		if mat[i].start < mat[i-1].end {
			return fmt.Errorf("generations %s [%d, %d) and %s [%d, %d) of %v overlap: a range was materialized (published) twice",
				mat[i-1].key, mat[i-1].start, mat[i-1].end, mat[i].key, mat[i].start, mat[i].end, id)
		}
	}
	all := spansOf(o.published[id])
	for i := range all {
		for j := i + 1; j < len(all) && all[j].start < all[i].end; j++ {
			a, b := all[i], all[j]
			contains := a.start <= b.start && b.end <= a.end || b.start <= a.start && a.end <= b.end
			if !contains || a.start == b.start && a.end == b.end {
				return fmt.Errorf("generations %s [%d, %d) and %s [%d, %d) of %v overlap: a range was published twice",
					a.key, a.start, a.end, b.key, b.start, b.end, id)
			}
		}
	}
	return nil
}

// observeOps feeds the applied puts of a batch to the oracle.
func (o *simOracle) observeOps(ops []metadata.Op, res []metadata.Result, err error) {
	if err != nil {
		return
	}
	for i, op := range ops {
		if op.Kind == metadata.OpPut && i < len(res) && res[i].Err == nil {
			o.observe(op.Key, op.Value)
		}
	}
}
