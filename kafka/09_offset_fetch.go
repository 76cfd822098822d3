package kafka

// OffsetFetch: v0-8
//
// Behavior:
//   - Returns the group's committed offsets from the metadata store; a
//     partition without one gets offset -1, leader epoch -1, no error. A
//     null topic list (v2+) returns every committed offset of the group.
//   - require_stable (v7+, KIP-447): a partition whose offset a transaction
//     has staged (TxnOffsetCommit) and not yet committed or aborted gets
//     UNSTABLE_OFFSET_COMMIT, which clients retry; without require_stable
//     the last committed offset is returned.
//
// Version notes:
//   - v1: same as v0 (kafka-go). v2: null topics = all, top-level error.
//   - v3: throttle. v4: same. v5: leader epoch. v6: flexible.
//   - v7: require_stable. v8: batched groups.
//   - v9: member id/epoch; for a KIP-848 consumer group they are checked
//     like OffsetCommit's (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID).
//   - v10 (topic ids) is not advertised.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kstore"
)

func init() { regKey(9, 0, 9, handleOffsetFetch) }

type offsetPartition struct {
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    *string
	ErrorCode   int16
}

type offsetTopic struct {
	Topic      string
	Partitions []offsetPartition
}

// fetchGroupOffsets answers one group's offset fetch; topics == nil means all.
func fetchGroupOffsets(r *request, group string, topics map[string][]int32, all, requireStable bool) ([]offsetTopic, int16) {
	if !r.s.groups.Owns(group) {
		return nil, kerr.NotCoordinator.Code
	}
	offs, err := r.s.store.FetchOffsetsFor(r.ctx, group, topics)
	if err != nil {
		return nil, errorCode(err)
	}
	if all {
		topics = map[string][]int32{}
		for tp := range offs {
			topics[tp.Topic] = append(topics[tp.Topic], tp.Partition)
		}
	}
	names := make([]string, 0, len(topics))
	for n := range topics {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []offsetTopic
	for _, n := range names {
		ps := append([]int32(nil), topics[n]...)
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		t := offsetTopic{Topic: n}
		for _, p := range ps {
			op := offsetPartition{Partition: p, Offset: -1, LeaderEpoch: -1}
			empty := ""
			op.Metadata = &empty
			if c, ok := offs[kstore.TopicPartition{Topic: n, Partition: p}]; ok {
				md := c.Metadata
				op.Offset, op.LeaderEpoch, op.Metadata = c.Offset, c.LeaderEpoch, &md
			}
			if requireStable && r.s.txns.HasPendingOffsets(group, n, p) {
				op.ErrorCode = kerr.UnstableOffsetCommit.Code
				op.Offset = -1
			}
			t.Partitions = append(t.Partitions, op)
		}
		out = append(out, t)
	}
	return out, 0
}

func handleOffsetFetch(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			topics := map[string][]int32{}
			for _, t := range rg.Topics {
				topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
			}
			res, code := fetchGroupOffsets(r, rg.Group, topics, rg.Topics == nil, req.RequireStable)
			if req.Version >= 9 && rg.MemberID != nil {
				if c, ok := r.s.consumers.CheckCommit(rg.Group, *rg.MemberID, rg.MemberEpoch); ok && c != 0 {
					res, code = nil, c
				}
			}
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = rg.Group, code
			for _, t := range res {
				gt := kmsg.NewOffsetFetchResponseGroupTopic()
				gt.Topic = t.Topic
				for _, p := range t.Partitions {
					gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
					gt.Partitions = append(gt.Partitions, gp)
				}
				g.Topics = append(g.Topics, gt)
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp, nil, nil
	}
	topics := map[string][]int32{}
	for _, t := range req.Topics {
		topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
	}
	res, code := fetchGroupOffsets(r, req.Group, topics, req.Topics == nil && req.Version >= 2, req.Version >= 7 && req.RequireStable)
	resp.ErrorCode = code
	for _, t := range res {
		ot := kmsg.NewOffsetFetchResponseTopic()
		ot.Topic = t.Topic
		for _, p := range t.Partitions {
			op := kmsg.NewOffsetFetchResponseTopicPartition()
			op.Partition, op.Offset, op.LeaderEpoch, op.Metadata, op.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil, nil
}
