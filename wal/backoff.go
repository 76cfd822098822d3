package wal

import (
	"context"
	"time"
)

// maxBackoff caps every retry sleep in this package.
const maxBackoff = 5 * time.Second

// backoff yields exponentially growing sleeps with full jitter, capped at
// maxBackoff, on a runtime's clock.
type backoff struct {
	next time.Duration
	rt   rt
}

func newBackoff(base time.Duration, r rt) backoff {
	if base <= 0 {
		base = 100 * time.Millisecond
	}
	return backoff{next: base, rt: r}
}

// sleep waits a random duration in [0, next], then doubles next. It returns
// ctx's error if ctx ends first.
func (b *backoff) sleep(ctx context.Context) error {
	d := time.Duration(b.rt.Uint64() % uint64(b.next+1))
	b.next = min(2*b.next, maxBackoff)
	return b.rt.Sleep(ctx, d)
}
