package bkwal

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/nereusstream/nereus-go/stream/provider"
)

// Retired-prefix rollover: a ledger is reclaimed whole, once its LAST
// committed run is retired, so a stream's current ledger keeps every byte
// it took until the ledger rolls over — with the default limits (512 MiB,
// 1h) a stream with a retention of seconds would keep minutes or hours of
// data on the bookies, however often retention trims it.
//
// A Reclaim pass therefore also asks the core about the FIRST committed
// run of every current ledger. Once that one is retired (trimmed, served by
// a published generation, or of a deleted stream) the ledger holds offsets
// nobody needs, and it is marked rollDue: the lane seals it before the next
// run and starts a new ledger, exactly as after a size rollover
// (needRollover), so the sealed ledger is reclaimed with the usual proof as
// soon as the rest of it is retired too. A stream with a retention of R thus
// rolls its ledger about every R plus a retention and a GC interval, and its
// bookies hold about two ledgers of that length rather than everything up
// to the size limit.
//
// Safety: the mark deletes nothing and changes no committed location; it
// only moves the next run to a new ledger, which the size limit does too.
// A judgement that turns out stale (the verdict is advisory here) only rolls
// a ledger early. The seal happens on the lane goroutine, where every
// rollover happens, so it never races an append. An idle stream (no next
// run) is left to the idle seal (idle.go).

// markRetiredPrefixes marks the current ledgers whose first committed run
// the core judges retired (see above). It returns how many it marked.
func (p *Provider) markRetiredPrefixes(ctx context.Context, judge provider.Judge) (int, error) {
	type cand struct {
		led *ledger
		ref provider.RunRef
	}
	var cands []cand
	p.mu.Lock()
	for _, led := range p.ledgers {
		led.mu.Lock()
		if !led.sealing && led.tainted == "" && led.hasFirst && !led.rollDue {
			cands = append(cands, cand{led: led, ref: provider.RunRef{Stream: led.stream, Epoch: led.epoch, Token: led.token,
				End: led.firstEnd, Committed: true}})
		}
		led.mu.Unlock()
	}
	p.mu.Unlock()
	if len(cands) == 0 {
		return 0, nil
	}
	// Map order is random; a fixed one lets a simulated pass replay.
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(a.led.id, b.led.id) })
	refs := make([]provider.RunRef, len(cands))
	for i, cd := range cands {
		refs[i] = cd.ref
	}
	verdicts, err := judge(ctx, refs)
	if err != nil {
		return 0, fmt.Errorf("nereus/bkwal: judging current ledgers' first runs: %w", err)
	}
	marked := 0
	for i, cd := range cands {
		if verdicts[i] != provider.RunRetired {
			continue
		}
		cd.led.mu.Lock()
		if !cd.led.rollDue {
			cd.led.rollDue = true
			marked++
		}
		cd.led.mu.Unlock()
	}
	return marked, nil
}

// rollRequested reports whether a Reclaim pass found the ledger's first
// committed run retired (markRetiredPrefixes).
func (led *ledger) rollRequested() bool {
	led.mu.Lock()
	defer led.mu.Unlock()
	return led.rollDue
}
