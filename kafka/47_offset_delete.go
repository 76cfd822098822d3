package kafka

// OffsetDelete: v0
//
// Behavior:
//   - Deletes a group's committed offsets for the named partitions (one
//     batch round trip to the metadata store). A group with neither
//     in-memory state nor offsets gets GROUP_ID_NOT_FOUND.
//   - A group that has members gets GROUP_SUBSCRIBED_TO_TOPIC for every
//     partition: Kafka refuses only the topics the members subscribe to;
//     this broker does not decode the members' subscriptions, so it keeps
//     the offsets of every topic of a live group. Delete offsets once the
//     group is empty (consumers stopped), as kafka-consumer-groups.sh
//     --delete-offsets is normally used.
//   - Unknown topics or partitions get UNKNOWN_TOPIC_OR_PARTITION.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kgroup"
	"github.com/nereusstream/nereus-go/kafka/kstore"
)

func init() { regKey(47, 0, 0, handleOffsetDelete) }

func handleOffsetDelete(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.OffsetDeleteRequest)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	inMemory, live := false, false
	r.s.groups.Do(req.Group, false, func(g *kgroup.Group, now time.Time) {
		if g != nil {
			inMemory = true
			live = g.State() != kgroup.Empty && g.State() != kgroup.Dead
		}
	})
	if !inMemory && !groupHasOffsets(r.ctx, r.s, req.Group) {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp, nil, nil
	}
	var del []kstore.TopicPartition
	var slots []*kmsg.OffsetDeleteResponseTopicPartition
	resp.Topics = make([]kmsg.OffsetDeleteResponseTopic, len(req.Topics))
	for ti, rt := range req.Topics {
		ot := &resp.Topics[ti]
		*ot = kmsg.NewOffsetDeleteResponseTopic()
		ot.Topic = rt.Topic
		ot.Partitions = make([]kmsg.OffsetDeleteResponseTopicPartition, len(rt.Partitions))
		for pi, rp := range rt.Partitions {
			op := &ot.Partitions[pi]
			*op = kmsg.NewOffsetDeleteResponseTopicPartition()
			op.Partition = rp.Partition
			if _, _, err := r.s.store.Partition(r.ctx, rt.Topic, rp.Partition); err != nil {
				op.ErrorCode = errorCode(err)
				continue
			}
			if live {
				op.ErrorCode = kerr.GroupSubscribedToTopic.Code
				continue
			}
			del = append(del, kstore.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
			slots = append(slots, op)
		}
	}
	if err := r.s.store.DeleteOffsets(r.ctx, req.Group, del); err != nil {
		for _, op := range slots {
			op.ErrorCode = errorCode(err)
		}
	}
	return resp, nil, nil
}
