package bkwal

import (
	"cmp"
	"context"
	"slices"

	"github.com/nereusstream/nereus-go/stream/provider"
)

// judgeCurrent is the shape the idle seal (idle.go) and the retired-prefix
// mark (retire.go) share: gather candidates among this incarnation's
// ledgers, then ask the core's judge, in one call, about the run each one
// names. pick runs under the provider's and the ledger's locks (so it must
// only read the ledger); it returns the candidate, whether the ledger is
// one, and the run to judge (nil: none). Candidates come back in ledger ID
// order — map order is random, a fixed one lets a simulated pass replay —
// with retired[i] set when candidate i's run was judged RunRetired. A judge
// error leaves the question open: nothing is returned, so the caller acts
// on nothing.
func judgeCurrent[T any](ctx context.Context, p *Provider, judge provider.Judge,
	pick func(led *ledger) (T, bool, *provider.RunRef)) (cands []T, retired []bool, err error) {
	type picked struct {
		id  int64
		c   T
		ref *provider.RunRef
	}
	var ps []picked
	p.mu.Lock()
	for _, led := range p.ledgers {
		led.mu.Lock()
		c, ok, ref := pick(led)
		led.mu.Unlock()
		if ok {
			ps = append(ps, picked{id: led.id, c: c, ref: ref})
		}
	}
	p.mu.Unlock()
	if len(ps) == 0 {
		return nil, nil, nil
	}
	slices.SortFunc(ps, func(a, b picked) int { return cmp.Compare(a.id, b.id) })
	var refs []provider.RunRef
	var judged []int
	for i, pk := range ps {
		if pk.ref != nil {
			refs = append(refs, *pk.ref)
			judged = append(judged, i)
		}
	}
	retired = make([]bool, len(ps))
	if len(refs) > 0 {
		verdicts, err := judge(ctx, refs)
		if err != nil {
			return nil, nil, err
		}
		for k, i := range judged {
			retired[i] = verdicts[k] == provider.RunRetired
		}
	}
	cands = make([]T, len(ps))
	for i, pk := range ps {
		cands[i] = pk.c
	}
	return cands, retired, nil
}
