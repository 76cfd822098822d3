package kafka

// DeleteRecords: v0-2
//
// Behavior:
//   - A compact-only topic (cleanup.policy=compact without delete) is
//     refused with POLICY_VIOLATION, as Kafka does: its log start offset
//     is its compacted view's.
//   - Trims the partition stream: the log start offset advances to the
//     requested offset (-1 means the high watermark). Offsets beyond the
//     high watermark get OFFSET_OUT_OF_RANGE. The start never moves
//     backwards. low_watermark is the resulting log start offset. Physical
//     reclamation happens later in the core; reads below the new start are
//     refused at once.
//
// Version notes:
//   - v1: same as v0. v2: flexible.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(21, 0, 2, handleDeleteRecords) }

func handleDeleteRecords(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	s := r.s
	for _, rt := range req.Topics {
		ot := kmsg.NewDeleteRecordsResponseTopic()
		ot.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			op := kmsg.NewDeleteRecordsResponseTopicPartition()
			op.Partition = rp.Partition
			op.LowWatermark = -1
			err := func() error {
				_, p, err := s.store.Partition(r.ctx, rt.Topic, rp.Partition)
				if err != nil {
					return err
				}
				_, end, err := s.store.Bounds(r.ctx, p)
				if err != nil {
					return err
				}
				if ok, err := s.store.DeletesRecords(r.ctx, p); err != nil || !ok {
					if err == nil {
						op.ErrorCode = kerr.PolicyViolation.Code // as Kafka: compact-only topics
					}
					return err
				}
				to := rp.Offset
				if to == -1 {
					to = end
				}
				if to < 0 || to > end {
					op.ErrorCode = kerr.OffsetOutOfRange.Code
					return nil
				}
				if err := s.store.Trim(r.ctx, p, to); err != nil {
					return err
				}
				start, _, err := s.store.Bounds(r.ctx, p)
				op.LowWatermark = start
				return err
			}()
			if err != nil {
				op.ErrorCode = errorCode(err)
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil, nil
}
