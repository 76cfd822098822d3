package kafka

// Client byte-rate quotas (producer_byte_rate, consumer_byte_rate) as Kafka
// enforces them: the bytes of each Produce / Fetch are recorded on a rate
// sensor of the request's quota entity (user and client id, resolved with
// Kafka's precedence from the quotas stored by AlterClientQuotas); when the
// measured rate exceeds the quota the response carries throttle_time_ms =
// (rate - quota) / quota * window, and the connection is not read again
// until that time has passed (KIP-219: clients also back off on their own).
// A throttled fetch returns no records, and its bytes are not counted.
// Without any quota configured this costs one atomic load per request.
//
// The user is the connection's principal; without authentication that is
// Kafka's "ANONYMOUS".

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nereusstream/nereus-go/kafka/kstore"
)

const (
	quotaSamples      = 11 // Kafka quota.window.num
	quotaSampleWindow = time.Second
	quotaRefresh      = 5 * time.Second // other brokers' changes apply within this
)

type quotaManager struct {
	store *kstore.Store
	now   func() time.Time

	any atomic.Bool // some producer/consumer byte-rate quota exists

	mu       sync.Mutex
	entries  []kstore.QuotaEntry
	loadedAt time.Time
	sensors  map[sensorKey]*rateSensor
}

type sensorKey struct {
	kind         string // quota key
	user, client string
}

func newQuotaManager(store *kstore.Store, now func() time.Time) *quotaManager {
	q := &quotaManager{store: store, now: now, sensors: map[sensorKey]*rateSensor{}}
	q.any.Store(true) // until the first load says otherwise
	return q
}

// invalidate makes the next request reload the quotas.
func (q *quotaManager) invalidate() {
	q.mu.Lock()
	q.loadedAt = time.Time{}
	q.mu.Unlock()
	q.any.Store(true)
}

// refresh reloads the quota entries if they are stale. Caller holds q.mu.
func (q *quotaManager) refresh(ctx context.Context, now time.Time) {
	if !q.loadedAt.IsZero() && now.Sub(q.loadedAt) < quotaRefresh {
		return
	}
	entries, err := q.store.ListQuotas(ctx)
	if err != nil {
		return // keep the last known quotas; retry on the next request
	}
	q.entries, q.loadedAt = entries, now
	any := false
	for _, e := range entries {
		if _, ok := e.Values[kstore.QuotaProducerByteRate]; ok {
			any = true
		}
		if _, ok := e.Values[kstore.QuotaConsumerByteRate]; ok {
			any = true
		}
	}
	q.any.Store(any)
}

// resolve finds the quota for (user, client id) with Kafka's precedence:
// user+client, user+default client, user, default user+client, default
// user+default client, default user, client, default client.
func (q *quotaManager) resolve(kind, user, client string) (float64, sensorKey, bool) {
	type want struct {
		user, client *string // nil: not part of the entity; "" pointer: default
		hasU, hasC   bool
	}
	def := (*string)(nil)
	u, c := &user, &client
	order := []want{
		{u, c, true, true}, {u, def, true, true}, {u, nil, true, false},
		{def, c, true, true}, {def, def, true, true}, {def, nil, true, false},
		{nil, c, false, true}, {nil, def, false, true},
	}
	for _, w := range order {
		for _, e := range q.entries {
			v, ok := e.Values[kind]
			if !ok || !entityMatches(e.Entity, w.hasU, w.user, w.hasC, w.client) {
				continue
			}
			k := sensorKey{kind: kind}
			if w.hasU {
				k.user = user
			}
			if w.hasC {
				k.client = client
			}
			return v, k, true
		}
	}
	return 0, sensorKey{}, false
}

func entityMatches(parts []kstore.QuotaEntityPart, hasU bool, user *string, hasC bool, client *string) bool {
	var gotU, gotC bool
	var pu, pc *string
	for _, p := range parts {
		switch p.Type {
		case kstore.QuotaUser:
			gotU, pu = true, p.Name
		case kstore.QuotaClientID:
			gotC, pc = true, p.Name
		default:
			return false
		}
	}
	same := func(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	return gotU == hasU && gotC == hasC && (!hasU || same(pu, user)) && (!hasC || same(pc, client))
}

// record counts n bytes for the entity and returns how long the client is
// to be throttled (0 when under its quota or without one).
func (q *quotaManager) record(ctx context.Context, kind, user, client string, n int) time.Duration {
	if !q.any.Load() {
		return 0
	}
	now := q.now()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refresh(ctx, now)
	quota, key, ok := q.resolve(kind, user, client)
	if !ok {
		return 0
	}
	sen := q.sensors[key]
	if sen == nil {
		sen = &rateSensor{}
		q.sensors[key] = sen
	}
	sen.add(now, float64(n))
	rate, window := sen.rate(now)
	if rate <= quota {
		return 0
	}
	d := time.Duration((rate - quota) / quota * float64(window))
	return min(d, quotaSamples*quotaSampleWindow)
}

// unrecord takes back bytes recorded for a response that was not sent
// (a throttled fetch).
func (q *quotaManager) unrecord(kind, user, client string, n int) {
	now := q.now()
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, key, ok := q.resolve(kind, user, client); ok {
		if sen := q.sensors[key]; sen != nil {
			sen.add(now, -float64(n))
		}
	}
}

// rateSensor is Kafka's windowed Rate: quotaSamples samples of
// quotaSampleWindow; the rate divides by the elapsed window, but never by
// less than quotaSamples-1 full samples.
type rateSensor struct {
	start [quotaSamples]time.Time
	sum   [quotaSamples]float64
	cur   int
}

func (r *rateSensor) add(now time.Time, v float64) {
	if r.start[r.cur].IsZero() || now.Sub(r.start[r.cur]) >= quotaSampleWindow {
		r.cur = (r.cur + 1) % quotaSamples
		r.start[r.cur], r.sum[r.cur] = now, 0
	}
	r.sum[r.cur] += v
}

func (r *rateSensor) rate(now time.Time) (float64, time.Duration) {
	total := 0.0
	oldest := now
	for i := range r.start {
		if r.start[i].IsZero() || now.Sub(r.start[i]) >= quotaSamples*quotaSampleWindow {
			continue
		}
		total += r.sum[i]
		if r.start[i].Before(oldest) {
			oldest = r.start[i]
		}
	}
	window := max(now.Sub(oldest), (quotaSamples-1)*quotaSampleWindow)
	return total / window.Seconds(), window
}

// principalName is the quota user of a request: the authenticated
// principal, or Kafka's ANONYMOUS without authentication.
func (r *request) principalName() string { return strings.TrimPrefix(r.principal(), "User:") }

// throttleConn stops reading the connection for d (KIP-219 muting).
func (c *conn) throttleConn(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := c.throttledUntil.Load()
		if cur >= until || c.throttledUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// waitThrottle blocks the reader while the connection is throttled.
func (c *conn) waitThrottle() {
	until := c.throttledUntil.Load()
	if until == 0 {
		return
	}
	d := time.Until(time.Unix(0, until))
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.ctx.Done():
	case <-c.s.stopping:
	}
}

// throttleProduce records a produce's bytes and throttles its client. user
// is r.principalName() taken on the reader goroutine (the connection's
// authentication state belongs to it).
func (r *request) throttleProduce(user string, bytes int) int32 {
	d := r.s.quotas.record(r.ctx, kstore.QuotaProducerByteRate, user, r.hdr.clientID, bytes)
	if d <= 0 {
		return 0
	}
	r.c.throttleConn(d)
	return int32(d / time.Millisecond)
}
