package wal

import (
	"context"
	"math/rand/v2"
	"time"
)

// maxBackoff caps every retry sleep in this package.
const maxBackoff = 5 * time.Second

// backoff yields exponentially growing sleeps with full jitter, capped at
// maxBackoff.
type backoff struct{ next time.Duration }

func newBackoff(base time.Duration) backoff {
	if base <= 0 {
		base = 100 * time.Millisecond
	}
	return backoff{next: base}
}

// sleep waits a random duration in [0, next], then doubles next. It returns
// ctx's error if ctx ends first.
func (b *backoff) sleep(ctx context.Context) error {
	d := time.Duration(rand.Int64N(int64(b.next) + 1))
	b.next = min(2*b.next, maxBackoff)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
