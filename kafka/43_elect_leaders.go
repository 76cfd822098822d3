package kafka

// ElectLeaders: v0-2
//
// Behavior:
//   - Every partition has exactly one possible leader, the broker holding
//     its stream's append session (shared storage: no replicas to choose
//     from), and it already is the leader. So a preferred or unclean
//     election of a named partition answers ELECTION_NOT_NEEDED, as Kafka
//     does for a partition whose preferred replica leads; unknown
//     partitions get UNKNOWN_TOPIC_OR_PARTITION. A null topic list (all
//     partitions) returns no partitions: none needed an election.
//
// Version notes:
//   - v1: election_type (0 preferred, 1 unclean), top-level error code.
//   - v2: flexible.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(43, 0, 2, handleElectLeaders) }

func handleElectLeaders(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	if req.Version >= 1 && req.ElectionType != 0 && req.ElectionType != 1 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil, nil
	}
	for _, rt := range req.Topics {
		ot := kmsg.NewElectLeadersResponseTopic()
		ot.Topic = rt.Topic
		for _, pi := range rt.Partitions {
			op := kmsg.NewElectLeadersResponseTopicPartition()
			op.Partition = pi
			if _, _, err := r.s.store.Partition(r.ctx, rt.Topic, pi); err != nil {
				op.ErrorCode, op.ErrorMessage = errorCode(err), errorMessage(err)
			} else {
				op.ErrorCode = kerr.ElectionNotNeeded.Code
				m := "nereus: the partition's only possible leader (its stream's session holder) already leads it"
				op.ErrorMessage = &m
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil, nil
}
