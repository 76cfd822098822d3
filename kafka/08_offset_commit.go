package kafka

// OffsetCommit: v0-8
//
// Behavior:
//   - Offsets are persisted in the metadata store (package kstore), one
//     record per partition, all partitions of a request in one batch round
//     trip, labelled with the topic id so a recreated topic never sees old
//     offsets.
//   - Classic-group rules (kgroup.CommitCheck): a commit from a member of
//     the current generation is accepted (also during a new join phase, as
//     Kafka allows for cooperative rebalancing); during CompletingRebalance
//     REBALANCE_IN_PROGRESS; unknown member UNKNOWN_MEMBER_ID; other
//     generation ILLEGAL_GENERATION. generation -1 with no member id is an
//     admin commit, allowed while the group has no members. v0 commits are
//     admin commits.
//   - Commits for unknown topics/partitions get UNKNOWN_TOPIC_OR_PARTITION;
//     metadata longer than 4096 bytes OFFSET_METADATA_TOO_LARGE.
//   - retention_time_ms (v2-4) is ignored: offsets are kept until the group
//     is deleted.
//
// Version notes:
//   - v1: generation, member id, per-partition timestamp (ignored).
//   - v2: retention_time_ms (kafka-go). v3: throttle. v4: same.
//   - v5: retention removed. v6: committed_leader_epoch.
//   - v7: group_instance_id: a superseded incarnation of a static member
//     gets FENCED_INSTANCE_ID. v8: flexible.
//   - v9: for a KIP-848 consumer group (package kconsumer) generation_id
//     is the member epoch: an unknown member UNKNOWN_MEMBER_ID, an older
//     epoch STALE_MEMBER_EPOCH, a newer one FENCED_MEMBER_EPOCH. Classic
//     groups keep the generation rules at every version.
//   - v10 (topic ids) is not advertised.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kgroup"
	"github.com/nereusstream/nereus-go/kafka/kstore"
)

func init() { regKey(8, 0, 9, handleOffsetCommit) }

const maxOffsetMetadata = 4096

func handleOffsetCommit(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	gen, member := req.Generation, req.MemberID
	if req.Version == 0 {
		gen, member = -1, ""
	}
	var code int16
	if req.Group == "" {
		code = kerr.InvalidGroupID.Code
	} else if c, ok := r.s.consumers.CheckCommit(req.Group, member, gen); ok {
		code = c // a KIP-848 group: generation is the member epoch
	} else {
		err := r.s.groups.Do(req.Group, false, func(g *kgroup.Group, now time.Time) {
			switch {
			case g != nil && req.Version >= 7 && g.CheckInstance(member, req.InstanceID) != 0:
				code = g.CheckInstance(member, req.InstanceID)
			case g != nil:
				code = g.CommitCheck(member, gen)
			case gen >= 0:
				code = kerr.UnknownMemberID.Code
			}
		})
		if err != nil {
			code = groupErrorCode(err)
		}
	}
	var commits []kstore.OffsetCommit
	var slots []*kmsg.OffsetCommitResponseTopicPartition
	resp.Topics = make([]kmsg.OffsetCommitResponseTopic, len(req.Topics))
	for ti, rt := range req.Topics {
		ot := &resp.Topics[ti]
		ot.Topic = rt.Topic
		ot.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(rt.Partitions))
		for pi, rp := range rt.Partitions {
			op := &ot.Partitions[pi]
			*op = kmsg.NewOffsetCommitResponseTopicPartition()
			op.Partition = rp.Partition
			switch {
			case code != 0:
				op.ErrorCode = code
			case rp.Metadata != nil && len(*rp.Metadata) > maxOffsetMetadata:
				op.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				c := kstore.OffsetCommit{Topic: rt.Topic, Partition: rp.Partition, Offset: rp.Offset, LeaderEpoch: -1}
				if req.Version >= 6 {
					c.LeaderEpoch = rp.LeaderEpoch
				}
				if rp.Metadata != nil {
					c.Metadata = *rp.Metadata
				}
				commits = append(commits, c)
				slots = append(slots, op)
			}
		}
	}
	if len(commits) > 0 {
		errs := r.s.store.CommitOffsets(r.ctx, req.Group, commits)
		for i, err := range errs {
			slots[i].ErrorCode = errorCode(err)
		}
		r.s.stats.OffsetCommits.Add(int64(len(commits)))
	}
	return resp, nil, nil
}
