package bkwal

import (
	"context"
	"fmt"

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
// to the size limit. (The retention-age roll, rollage.go, rolls a busy
// stream's ledger sooner, at R/2, once the core has hinted R; this one
// covers streams without a hint: size retention, a trim, a generation.)
// Both go through the churn floor (rollage.go).
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
	cands, retired, err := judgeCurrent(ctx, p, judge, func(led *ledger) (*ledger, bool, *provider.RunRef) {
		if led.sealing || led.tainted != "" || !led.hasFirst || led.rollDue {
			return nil, false, nil
		}
		return led, true, &provider.RunRef{Stream: led.stream, Epoch: led.epoch, Token: led.token, End: led.firstEnd, Committed: true}
	})
	if err != nil {
		return 0, fmt.Errorf("nereus/bkwal: judging current ledgers' first runs: %w", err)
	}
	marked := 0
	for i, led := range cands {
		if !retired[i] {
			continue
		}
		led.mu.Lock()
		if !led.rollDue {
			led.rollDue = true
			marked++
		}
		led.mu.Unlock()
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
