package s3store

import (
	"context"
	"math/rand/v2"
	"time"
)

// backoff sleeps for an exponentially growing, jittered delay (attempt 0 is
// the first retry) or until ctx is done.
func backoff(ctx context.Context, initial, maxDelay time.Duration, attempt int) error {
	d := initial << min(attempt, 20)
	if d > maxDelay || d <= 0 {
		d = maxDelay
	}
	// Full jitter in [d/2, d): spreads racing writers apart.
	d = d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
