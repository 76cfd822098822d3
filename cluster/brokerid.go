package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
)

// ErrBrokerIDTaken: the requested Kafka broker id is claimed by another
// node. Choose another id (or let the cluster allocate one).
var ErrBrokerIDTaken = errors.New("nereus/cluster: kafka broker id claimed by another node")

type brokerIDClaim struct {
	V         int    `json:"v"`
	NodeID    string `json:"nodeId"`
	ClaimedMs int64  `json:"claimedMs"`
}

// ClaimKafkaBrokerID returns the stable int32 Kafka broker id of nodeID.
//
// The id is derived once: with want > 0 (the id persisted in the node's
// data dir, or configured) that id is claimed; otherwise the next value of
// the cluster's id counter is (1, 2, 3, ... — the small ids Kafka users
// expect). A claim is a create-only record cluster/kafka-broker-ids/<id>
// naming the node, so two nodes never share an id even when they race;
// re-claiming one's own id is a no-op. The caller persists the result so
// the node keeps its id across restarts.
func ClaimKafkaBrokerID(ctx context.Context, meta metadata.Store, nodeID string, want int32) (int32, error) {
	if nodeID == "" {
		return 0, errors.New("nereus/cluster: ClaimKafkaBrokerID needs a node id")
	}
	if want < 0 {
		return 0, fmt.Errorf("nereus/cluster: kafka broker id %d is negative", want)
	}
	if want > 0 {
		ok, err := claimID(ctx, meta, nodeID, want)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, fmt.Errorf("%w: id %d", ErrBrokerIDTaken, want)
		}
		return want, nil
	}
	for attempt := 0; attempt < 1000; attempt++ {
		cand, err := nextCounter(ctx, meta, keyKafkaIDSeq)
		if err != nil {
			return 0, err
		}
		if cand > math.MaxInt32 {
			return 0, errors.New("nereus/cluster: kafka broker ids exhausted")
		}
		ok, err := claimID(ctx, meta, nodeID, int32(cand))
		if err != nil {
			return 0, err
		}
		if ok {
			return int32(cand), nil
		}
	}
	return 0, errors.New("nereus/cluster: no free kafka broker id after 1000 candidates")
}

// claimID claims id for nodeID; false means another node holds it.
func claimID(ctx context.Context, meta metadata.Store, nodeID string, id int32) (bool, error) {
	key := keyKafkaIDs + strconv.Itoa(int(id))
	val, err := encodeRecord(brokerIDClaim{V: 1, NodeID: nodeID, ClaimedMs: time.Now().UnixMilli()})
	if err != nil {
		return false, err
	}
	for attempt := 0; attempt < 16; attempt++ {
		rec, err := meta.Get(ctx, key)
		switch {
		case err == nil:
			var c brokerIDClaim
			if err := decodeRecord(rec.Value, &c); err != nil {
				return false, fmt.Errorf("%s: %w", key, err)
			}
			return c.NodeID == nodeID, nil
		case !errors.Is(err, metadata.ErrKeyNotFound):
			return false, err
		}
		_, err = meta.Put(ctx, key, val, metadata.NotExists)
		switch metadata.Classify(err) {
		case metadata.Applied:
			return true, nil
		case metadata.Conflict, metadata.Unknown:
			// Someone (maybe we) created it: the re-read decides.
			if err := ctx.Err(); err != nil {
				return false, err
			}
			continue
		default:
			return false, err
		}
	}
	return false, fmt.Errorf("nereus/cluster: claiming kafka broker id %d: too many conflicts", id)
}

// nextCounter increments the decimal counter at key by CAS and returns the
// new value. An unknown outcome re-reads and tries again, so a value may be
// skipped but is never handed out twice.
func nextCounter(ctx context.Context, meta metadata.Store, key string) (int64, error) {
	for attempt := 0; attempt < 64; attempt++ {
		var cur int64
		ver := metadata.NotExists
		rec, err := meta.Get(ctx, key)
		switch {
		case err == nil:
			if cur, err = strconv.ParseInt(string(rec.Value), 10, 64); err != nil {
				return 0, fmt.Errorf("%w: counter %s: %v", ErrCorruptRecord, key, err)
			}
			ver = rec.Version
		case !errors.Is(err, metadata.ErrKeyNotFound):
			return 0, err
		}
		_, err = meta.Put(ctx, key, []byte(strconv.FormatInt(cur+1, 10)), ver)
		switch metadata.Classify(err) {
		case metadata.Applied:
			return cur + 1, nil
		case metadata.Conflict, metadata.Unknown:
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			continue
		default:
			return 0, err
		}
	}
	return 0, fmt.Errorf("nereus/cluster: counter %s: too many conflicts", key)
}
