package kafka

// ConsumerGroupDescribe: v0-1
//
// Behavior:
//   - Describes KIP-848 consumer groups: state (Empty, Assigning,
//     Reconciling, Stable), group epoch, assignment epoch, the assignor in
//     use and per member its epoch, client, subscription, current and
//     target assignment (topic ids and names). A group id that is not a
//     consumer group (unknown, or classic) gets GROUP_ID_NOT_FOUND, which
//     makes admin clients fall back to DescribeGroups.
//
// Version notes:
//   - v1: member_type (always 1, consumer).

import (
	"math"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kconsumer"
)

func init() { regKey(69, 0, 1, handleConsumerGroupDescribe) }

func handleConsumerGroupDescribe(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		g := kmsg.NewConsumerGroupDescribeResponseGroup()
		g.Group = id
		g.AuthorizedOperations = math.MinInt32
		if req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = allGroupOps
		}
		cg, ok := r.s.consumers.Describe(id)
		if !ok {
			g.ErrorCode = kerr.GroupIDNotFound.Code
			m := "group " + id + " is not a consumer group"
			g.ErrorMessage = &m
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g.State, g.Epoch, g.AssignmentEpoch, g.AssignorName = cg.StateName(), cg.Epoch, cg.AssignmentEpoch, cg.AssignorName
		names := r.s.topicNamesByID(r)
		ids := make([]string, 0, len(cg.Members))
		for mid := range cg.Members {
			ids = append(ids, mid)
		}
		sort.Strings(ids)
		for _, mid := range ids {
			m := cg.Members[mid]
			gm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
			gm.MemberID, gm.MemberEpoch, gm.ClientID, gm.ClientHost = m.ID, m.Epoch, m.ClientID, m.ClientHost
			if m.InstanceID != "" {
				inst := m.InstanceID
				gm.InstanceID = &inst
			}
			if m.RackID != "" {
				rack := m.RackID
				gm.RackID = &rack
			}
			gm.SubscribedTopics = append([]string(nil), m.Subscribed...)
			if m.Regex != "" {
				re := m.Regex
				gm.SubscribedTopicRegex = &re
			}
			gm.Assignment = toKmsgAssignment(m.Assigned, names)
			gm.TargetAssignment = toKmsgAssignment(cg.Target[mid], names)
			gm.MemberType = 1
			g.Members = append(g.Members, gm)
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil, nil
}

func toKmsgAssignment(a kconsumer.Assignment, names map[kconsumer.TopicID]string) kmsg.Assignment {
	out := kmsg.NewAssignment()
	for t, ps := range a {
		tp := kmsg.NewAssignmentTopicPartition()
		tp.TopicID, tp.Topic, tp.Partitions = t, names[t], append([]int32(nil), ps...)
		out.TopicPartitions = append(out.TopicPartitions, tp)
	}
	sort.Slice(out.TopicPartitions, func(i, j int) bool { return out.TopicPartitions[i].Topic < out.TopicPartitions[j].Topic })
	return out
}

// topicNamesByID maps every topic id to its name.
func (s *Server) topicNamesByID(r *request) map[kconsumer.TopicID]string {
	out := map[kconsumer.TopicID]string{}
	names, err := s.store.ListTopics(r.ctx)
	if err != nil {
		return out
	}
	for _, n := range names {
		if t, err := s.store.Topic(r.ctx, n); err == nil {
			out[kconsumer.TopicID(t.ID)] = n
		}
	}
	return out
}
