package kafka

// TxnOffsetCommit: v0-4
//
// Behavior:
//   - Stages the group's offsets in the producer's transaction (persisted
//     in the transaction's coordinator record); they become the group's
//     committed offsets only when the transaction commits, and are dropped
//     when it aborts. The group must have been added with AddOffsetsToTxn
//     (else INVALID_TXN_STATE); producer errors as for AddPartitionsToTxn.
//   - v3+ (KIP-447): a commit naming a member and generation is checked
//     against the classic group like OffsetCommit (ILLEGAL_GENERATION,
//     UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS), so a consumer that lost its
//     partitions in a rebalance cannot commit their offsets; generation -1
//     without a member id is not checked (the pre-KIP-447 form).
//   - While offsets are staged, OffsetFetch with require_stable answers
//     UNSTABLE_OFFSET_COMMIT for those partitions.
//   - Metadata longer than 4096 bytes OFFSET_METADATA_TOO_LARGE; unknown
//     topics or partitions UNKNOWN_TOPIC_OR_PARTITION.
//
// Version notes:
//   - v1: same as v0. v2: committed leader epoch. v3: flexible, group
//     generation/member/instance (KIP-447). v4: same as v3.
//   - v5 (KIP-890 part 2) and v6 (topic ids) are not advertised.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kgroup"
	"github.com/nereusstream/nereus-go/kafka/ktxn"
)

func init() { regKey(28, 0, 4, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.TxnOffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	var code int16
	if req.Group == "" {
		code = kerr.InvalidGroupID.Code
	} else if req.Version >= 3 && (req.Generation >= 0 || req.MemberID != "") {
		r.s.groups.Do(req.Group, false, func(g *kgroup.Group, now time.Time) {
			if g == nil {
				code = kerr.UnknownMemberID.Code
				return
			}
			if code = g.CheckInstance(req.MemberID, req.InstanceID); code == 0 {
				code = g.CommitCheck(req.MemberID, req.Generation)
			}
		})
	}
	var offs []ktxn.Offset
	var slots []*kmsg.TxnOffsetCommitResponseTopicPartition
	resp.Topics = make([]kmsg.TxnOffsetCommitResponseTopic, len(req.Topics))
	for ti, rt := range req.Topics {
		ot := &resp.Topics[ti]
		*ot = kmsg.NewTxnOffsetCommitResponseTopic()
		ot.Topic = rt.Topic
		ot.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(rt.Partitions))
		for pi, rp := range rt.Partitions {
			op := &ot.Partitions[pi]
			*op = kmsg.NewTxnOffsetCommitResponseTopicPartition()
			op.Partition = rp.Partition
			switch {
			case code != 0:
				op.ErrorCode = code
			case rp.Metadata != nil && len(*rp.Metadata) > maxOffsetMetadata:
				op.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				if _, _, err := r.s.store.Partition(r.ctx, rt.Topic, rp.Partition); err != nil {
					op.ErrorCode = errorCode(err)
					continue
				}
				o := ktxn.Offset{Topic: rt.Topic, Partition: rp.Partition, Offset: rp.Offset, LeaderEpoch: -1}
				if req.Version >= 2 {
					o.LeaderEpoch = rp.LeaderEpoch
				}
				if rp.Metadata != nil {
					o.Metadata = *rp.Metadata
				}
				offs = append(offs, o)
				slots = append(slots, op)
			}
		}
	}
	if len(offs) == 0 {
		return resp, nil, nil
	}
	return nil, func() kmsg.Response {
		c := r.s.txns.StageOffsets(r.ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group, offs)
		if c == kerr.ProducerFenced.Code && req.Version < 2 {
			c = kerr.InvalidProducerEpoch.Code
		}
		for _, op := range slots {
			op.ErrorCode = c
		}
		return resp
	}, nil
}
