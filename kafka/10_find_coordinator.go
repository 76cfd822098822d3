package kafka

// FindCoordinator: v0-4
//
// Behavior:
//   - A consumer group's coordinator (key_type 0) is the broker that owns
//     the group's key, a transactional id's (key_type 1; package ktxn) the
//     owner of the id's key (rendezvous hashing over the active brokers);
//     every broker answers the same. Group state is stored, so when the
//     owner changes the new coordinator resumes the group.
//   - Share groups (key_type 2) do not exist here: COORDINATOR_NOT_AVAILABLE
//     with a message saying so; other key types INVALID_REQUEST.
//   - v4+ answers each batched key separately, echoing the key.
//
// Version notes:
//   - v0: group key only (kafka-go; librdkafka < 2.11.1 enables consumer
//     groups only if the range overlaps exactly v0).
//   - v1: key_type, error message. v2: same. v3: flexible.
//   - v4: batched coordinator_keys (kgo, Java 4.x).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/cluster"
)

func init() { regKey(10, 0, 4, handleFindCoordinator) }

func handleFindCoordinator(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	r.s.cluster.Settle(r.ctx) // a coordinator that just crashed is named dead
	find := func(key string) (id int32, host string, port int32, code int16, msg *string) {
		var owner cluster.Broker
		var ok bool
		switch req.CoordinatorType {
		case 0:
			owner, ok = r.s.cluster.OwnerOf(cluster.GroupKey(key))
		case 1:
			owner, ok = r.s.cluster.OwnerOf(cluster.TxnKey(key))
		case 2:
			m := "nereus: share groups are not supported"
			return -1, "", -1, kerr.CoordinatorNotAvailable.Code, &m
		default:
			m := "nereus: unknown coordinator key type"
			return -1, "", -1, kerr.InvalidRequest.Code, &m
		}
		if ok {
			if h, p, reachable := r.kafkaEndpoint(owner); reachable {
				return owner.KafkaID, h, p, 0, nil
			}
		}
		m := "nereus: no active broker to coordinate the key"
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code, &m
	}
	if req.Version < 4 {
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = find(req.CoordinatorKey)
		return resp, nil, nil
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage = find(key)
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp, nil, nil
}
