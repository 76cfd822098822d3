package bkwal

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
)

// Retention-age rollover: a ledger is reclaimed whole, once its newest run
// is retired, so a stream's bookies hold everything from the first run of
// its oldest ledger on. The retired-prefix rollover (retire.go) bounds a
// ledger at about the stream's retention R plus a retention and a GC
// interval, so a busy stream holds up to about two such ledgers: on
// average ≈ 1.5 R + a few seconds, not the ≈ R + 3 s the Object WAL holds.
//
// The core therefore tells the provider each stream's time retention
// (provider.RetentionHinter; a hint, advisory), and the lane rolls a
// stream's current ledger at its next run once the ledger is older than
// R/2: a ledger then spans ≈ R/2, the oldest one is on average half
// retired, and the bookies hold ≈ R + R/4 + the intervals.
//
// Churn floor: a roll for retention's sake (this one or a retired prefix)
// is a ledger create, a seal and later a delete on ZooKeeper. With 10,000
// busy streams and a 5 s retention, rolling at R/2 would be 4,000 ledger
// creates per second. Such rolls therefore wait until the ledger is at
// least MinRollAge old and take a token from one provider-wide bucket
// refilled at MaxRetentionRolls per second (burst one second's worth);
// without a token the run goes into the current ledger and the roll is
// retried at the next run. Space then degrades towards the size and age
// limits instead of ZooKeeper's write rate degrading for everyone. Rolls
// the ledger's correctness needs (a new session, a taint) and the
// configured size and age limits never wait.
//
// Safety: as for the retired prefix — a roll deletes nothing and moves no
// committed location, and it happens on the lane goroutine.

// HintRetention implements provider.RetentionHinter.
func (p *Provider) HintRetention(stream uint64, timeRetention time.Duration) {
	r := max(int64(timeRetention), 0)
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.lanes[stream]; l != nil {
		l.retention.Store(r)
		delete(p.hints, stream)
		return
	}
	if r == 0 {
		delete(p.hints, stream)
		return
	}
	p.hints[stream] = laneHint{retention: r, at: p.cfg.Now()}
}

// laneHint is the retention hint of a stream this provider has no lane
// for (no run written here yet), kept for the lane its first run makes.
type laneHint struct {
	retention int64     // ns
	at        time.Time // when last hinted
}

// hintTTL is how long a hint of a stream without a lane is kept after the
// core last gave it. The core hints every stream it owns on every
// retention pass (every second by default), so only a stream it no longer
// hints — deleted and gone from the listing, or owned elsewhere now — ages
// out; dropping a live one by mistake costs nothing lasting (its next
// hint sets it again, on the lane if one was made meanwhile).
const hintTTL = time.Minute

// pruneHints drops, at most once per hintTTL, the hints not given for
// hintTTL: a deleted stream that was never written here would otherwise
// keep its entry for the provider's life.
func (p *Provider) pruneHints() {
	now := p.cfg.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Sub(p.hintsPruned) < hintTTL {
		return
	}
	p.hintsPruned = now
	for s, h := range p.hints {
		if now.Sub(h.at) >= hintTTL {
			delete(p.hints, s)
		}
	}
}

// retentionRollDue says why the lane should roll its current ledger for
// retention's sake ("" if not, or not yet): the first run is retired, or
// the ledger is older than half the stream's retention.
func (l *lane) retentionRollDue(c *ledger, now time.Time) string {
	age := now.Sub(c.created)
	if age < l.p.cfg.MinRollAge {
		return ""
	}
	if c.rollRequested() {
		return "retired prefix"
	}
	if r := time.Duration(l.retention.Load()); r > 0 && age >= r/2 {
		return "retention age"
	}
	return ""
}

// takeRetentionRoll reports whether a retention roll may happen now: it
// takes a token from the provider-wide budget (see above).
func (p *Provider) takeRetentionRoll(now time.Time) bool {
	return p.rolls.AllowN(now, 1)
}

// openLedgerBytes sums the bytes sent to this incarnation's ledgers that
// are not sealed yet — the ledgers whose length ZooKeeper does not show.
func (p *Provider) openLedgerBytes() (n, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, led := range p.ledgers {
		led.mu.Lock()
		if !led.sealed {
			n++
			bytes += led.bytes
		}
		led.mu.Unlock()
	}
	return n, bytes
}

// observeOpenLedgers exports openLedgerBytes as gauges
// (nereus_bkwal_open_ledger_bytes, nereus_bkwal_open_ledgers); the
// returned function unregisters them.
func (p *Provider) observeOpenLedgers(m metric.Meter) func() {
	if m == nil {
		m = otel.GetMeterProvider().Meter(instrumentationName)
	}
	gb, err1 := m.Int64ObservableGauge("nereus.bkwal.open_ledger_bytes", metric.WithUnit("By"),
		metric.WithDescription("bytes (per replica, entry frames) in this node's ledgers not sealed yet: their length is not in ZooKeeper"))
	gn, err2 := m.Int64ObservableGauge("nereus.bkwal.open_ledgers", metric.WithUnit("{ledger}"),
		metric.WithDescription("this node's ledgers not sealed yet"))
	if err1 != nil || err2 != nil {
		return func() {}
	}
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		n, b := p.openLedgerBytes()
		o.ObserveInt64(gb, b)
		o.ObserveInt64(gn, n)
		return nil
	}, gb, gn)
	if err != nil {
		return func() {}
	}
	return func() { _ = reg.Unregister() }
}
