package bookkeeper

import (
	"fmt"
	"math/rand/v2"
)

// writeSet returns the ensemble indexes that store entry e: (e+i) % E for
// i in [0, WQ) (RoundRobinDistributionSchedule; absolute entry IDs).
func writeSet(e int64, ensembleSize, writeQuorum int) []int {
	ws := make([]int, writeQuorum)
	for i := range ws {
		ws[i] = int((e + int64(i)) % int64(ensembleSize))
	}
	return ws
}

// answer is one bookie's answer in a coverage round.
type answer uint8

const (
	answerPending answer = iota
	answerOK             // has data (EOK with a valid digest)
	answerMissing        // ENOENTRY / ENOLEDGER: a valid "I have nothing"
	answerFailed         // error, timeout, digest mismatch
)

// covered reports whether the answers cover every write set: for each start
// index i, fewer than AQ of the bookies (i+j)%E, j < WQ, are still pending
// or failed (RRQuorumCoverageSet.checkCovered). Once covered, no entry that
// reached its ack quorum can have been missed by the answers.
func covered(answers []answer, writeQuorum, ackQuorum int) bool {
	e := len(answers)
	for i := 0; i < e; i++ {
		bad := 0
		for j := 0; j < writeQuorum; j++ {
			if a := answers[(i+j)%e]; a == answerPending || a == answerFailed {
				bad++
			}
		}
		if bad >= ackQuorum {
			return false
		}
	}
	return true
}

// PlacementPolicy chooses an ensemble of size n from the writable bookies.
// It must return n distinct IDs from available, in ensemble order.
type PlacementPolicy func(available []BookieInfo, n int) ([]string, error)

// RandomPlacement picks n distinct bookies uniformly at random.
func RandomPlacement(available []BookieInfo, n int) ([]string, error) {
	if len(available) < n {
		return nil, fmt.Errorf("%w: need %d, have %d", ErrNotEnoughBookies, n, len(available))
	}
	idx := rand.Perm(len(available))[:n]
	out := make([]string, n)
	for i, j := range idx {
		out[i] = available[j].ID
	}
	return out, nil
}
