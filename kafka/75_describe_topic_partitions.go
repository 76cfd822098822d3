package kafka

// DescribeTopicPartitions: v0
//
// Behavior:
//   - Describes the named topics (all topics when none are named) with the
//     same partition view as Metadata (leader = this broker at its
//     append-session epoch, replicas = isr = [this broker]; no eligible
//     leader replicas, nothing offline), in topic-name order, paginated:
//     at most response_partition_limit partitions (default and maximum
//     2000) per answer, starting at the cursor; next_cursor names the
//     first partition not returned. Unknown topics get
//     UNKNOWN_TOPIC_OR_PARTITION; topics are never auto-created.
//   - The internal topics are flagged is_internal.

import (
	"math"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(75, 0, 0, handleDescribeTopicPartitions) }

const maxDescribePartitions = 2000

func handleDescribeTopicPartitions(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	s := r.s
	var names []string
	if len(req.Topics) == 0 {
		all, err := s.store.ListTopics(r.ctx)
		if err != nil {
			return nil, nil, err
		}
		names = all
	} else {
		for _, t := range req.Topics {
			names = append(names, t.Topic)
		}
		sort.Strings(names)
	}
	limit := int(req.ResponsePartitionLimit)
	if limit <= 0 || limit > maxDescribePartitions {
		limit = maxDescribePartitions
	}
	first := int32(0)
	if c := req.Cursor; c != nil {
		i := sort.SearchStrings(names, c.Topic)
		names = names[i:]
		first = c.Partition
	}
	returned := 0
	for ni, name := range names {
		t, err := s.store.Topic(r.ctx, name)
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		n := name
		rt.Topic = &n
		rt.AuthorizedOperations = math.MinInt32
		if err != nil {
			rt.ErrorCode = errorCode(err)
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		rt.TopicID, rt.IsInternal = t.ID, isInternalTopic(name)
		start := int32(0)
		if ni == 0 {
			start = first
		}
		mt := r.describeTopic(t, false)
		for _, mp := range mt.Partitions {
			if mp.Partition < start {
				continue
			}
			if returned == limit {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: mp.Partition}
				break
			}
			rp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			rp.ErrorCode, rp.Partition, rp.LeaderID, rp.LeaderEpoch = mp.ErrorCode, mp.Partition, mp.Leader, mp.LeaderEpoch
			rp.Replicas, rp.ISR = mp.Replicas, mp.ISR
			rp.EligibleLeaderReplicas, rp.LastKnownELR, rp.OfflineReplicas = []int32{}, []int32{}, []int32{}
			rt.Partitions = append(rt.Partitions, rp)
			returned++
		}
		resp.Topics = append(resp.Topics, rt)
		if resp.NextCursor != nil {
			break
		}
	}
	return resp, nil, nil
}
