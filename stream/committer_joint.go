package stream

import (
	"github.com/nereusstream/nereus-go/metadata"
)

// jointRoundMaxStreams bounds the streams of a joint round. A joint round
// prepares every shard's part on one goroutine; beyond this many streams
// the per-stream work is what the shards exist to spread over cores
// (committer.go), and each shard runs its own round.
const jointRoundMaxStreams = 256

// runJoint performs one round for the shards a completion group released
// together (releaseRounds; each is marked busy): every shard gathers its
// round as usual, and their ops go to the store in ONE Batch. Streams are
// in exactly one shard, so the ops name distinct keys, and their outcomes
// are independent as within a shard's own round. Each shard's machines are
// stepped with their part of the results; then every shard continues on
// its own (its rounds stay sequential: it was busy throughout).
func (c *Core) runJoint(cms []*committer) {
	var rounds []*round
	var shards []*committer
	for _, cm := range cms {
		if r := cm.gather(); r != nil {
			rounds = append(rounds, r)
			shards = append(shards, cm)
		}
	}
	switch len(rounds) {
	case 0:
		return
	case 1:
		shards[0].runFrom(rounds[0])
		return
	}
	n := 0
	for _, r := range rounds {
		n += len(r.ops)
	}
	ops := make([]metadata.Op, 0, n)
	for _, r := range rounds {
		ops = append(ops, r.ops...)
	}
	ctx := c.ctx
	start := c.rt.now()
	async := false
	completed := c.rt.batch(ctx, c.meta, ops, func(res []metadata.Result, err error) {
		c.observeTrip(len(ops), start, err)
		i := 0
		for k, r := range rounds {
			var part []metadata.Result
			if err == nil {
				part = res[i : i+len(r.ops)]
			}
			i += len(r.ops)
			shards[k].finish(r, part, err)
		}
		if async {
			for _, cm := range shards {
				cm.next(err)
			}
		} else if err != nil {
			_ = c.rt.sleep(ctx, unknownBackoff) // as in committer.run
		}
	})
	if completed {
		// Each shard goes on by itself; this goroutine takes the first.
		for _, cm := range shards[1:] {
			c.rt.goFunc(cm.run)
		}
		shards[0].run()
	} else {
		async = true
	}
}
