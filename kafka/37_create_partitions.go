package kafka

// CreatePartitions: v0-3
//
// Behavior:
//   - Raises a topic's partition count: the new partition streams are
//     created (with the topic's profile and id label) before the topic
//     record's count is raised by CAS, so a partition is never visible
//     without its stream. A count that does not grow gets INVALID_PARTITIONS.
//   - Manual assignments must name only this broker.
//   - validate_only checks without creating; timeout_ms is ignored.
//
// Version notes:
//   - v1: same as v0. v2: flexible. v3: same as v2.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(37, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, rt := range req.Topics {
		ot := kmsg.NewCreatePartitionsResponseTopic()
		ot.Topic = rt.Topic
		var err error
		for _, a := range rt.Assignment {
			if len(a.Replicas) != 1 || a.Replicas[0] != r.s.cfg.NodeID {
				err = errAssignment
			}
		}
		if err == nil {
			err = r.s.store.CreatePartitions(r.ctx, rt.Topic, rt.Count, req.ValidateOnly)
		}
		ot.ErrorCode, ot.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil, nil
}
