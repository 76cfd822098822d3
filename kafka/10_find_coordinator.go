package kafka

// FindCoordinator: v0-4
//
// Behavior:
//   - This broker coordinates every consumer group (key_type 0) and every
//     transactional id (key_type 1; package ktxn).
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
)

func init() { regKey(10, 0, 4, handleFindCoordinator) }

func handleFindCoordinator(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	host, port := r.advertised()
	var code int16
	var msg *string
	switch req.CoordinatorType {
	case 0, 1:
	case 2:
		code = kerr.CoordinatorNotAvailable.Code
		m := "nereus: share groups are not supported"
		msg = &m
	default:
		code = kerr.InvalidRequest.Code
		m := "nereus: unknown coordinator key type"
		msg = &m
	}
	if req.Version < 4 {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		if code == 0 {
			resp.NodeID, resp.Host, resp.Port = r.s.cfg.NodeID, host, port
		} else {
			resp.NodeID, resp.Port = -1, -1
		}
		return resp, nil, nil
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.ErrorCode, c.ErrorMessage = code, msg
		if code == 0 {
			c.NodeID, c.Host, c.Port = r.s.cfg.NodeID, host, port
		} else {
			c.NodeID, c.Port = -1, -1
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp, nil, nil
}
