package kafka

// OffsetForLeaderEpoch: v2-4
//
// Behavior:
//   - The partition leader epoch is the append-session epoch. Nereus never
//     truncates committed data, so no epoch ever ends before the log end:
//     for any requested epoch <= the current one the answer is
//     (requested epoch, log end offset), which tells a consumer validating
//     its position after a leader change that nothing diverged. A requested
//     epoch above the current one gets epoch -1 / end offset -1 (Kafka's
//     "undefined"), as Kafka answers.
//   - current_leader_epoch is checked like Fetch (FENCED_LEADER_EPOCH /
//     UNKNOWN_LEADER_EPOCH).
//   - replica_id (v3+) is ignored: there are no follower replicas.
//
// Version notes:
//   - v2: current_leader_epoch (librdkafka uses exactly v2; Kafka 4's floor).
//   - v3: replica_id (Java consumer validation needs v3+).
//   - v4: flexible.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(23, 2, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	s := r.s
	for _, rt := range req.Topics {
		ot := kmsg.NewOffsetForLeaderEpochResponseTopic()
		ot.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			op := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			op.Partition = rp.Partition
			op.LeaderEpoch, op.EndOffset = -1, -1
			err := func() error {
				_, p, err := s.store.Partition(r.ctx, rt.Topic, rp.Partition)
				if err != nil {
					return err
				}
				if rp.CurrentLeaderEpoch >= 0 {
					if err := checkLeaderEpoch(r.ctx, s, p, rp.CurrentLeaderEpoch); err != nil {
						return err
					}
				}
				ours, err := s.store.LeaderEpoch(r.ctx, p)
				if err != nil {
					return err
				}
				if rp.LeaderEpoch > ours {
					return nil
				}
				_, end, err := s.store.Bounds(r.ctx, p)
				if err != nil {
					return err
				}
				op.LeaderEpoch, op.EndOffset = rp.LeaderEpoch, end
				return nil
			}()
			op.ErrorCode = errorCode(err)
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil, nil
}
