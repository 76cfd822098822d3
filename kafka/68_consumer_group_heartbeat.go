package kafka

// ConsumerGroupHeartbeat: v0-1
//
// Behavior:
//   - The KIP-848 consumer group protocol (Java 4.x group.protocol=consumer,
//     kgo ServerSideBalancer, librdkafka group.protocol=consumer): the
//     coordinator (package kconsumer) assigns partitions with the uniform
//     (sticky, balanced) or range server assignor and reconciles each
//     member incrementally — partitions leaving a member are revoked first
//     (its epoch stays until it confirms by heartbeating without them), and
//     a partition is given to its new owner only after the old one released
//     it. The assignment is sent when it changed; null otherwise.
//   - member_epoch 0 joins (a subscription is required), -1 leaves, -2
//     leaves as a static member that will rejoin (its instance id's next
//     incarnation takes over its assignment). A known member with an older
//     epoch is accepted only if the partitions it reports are a subset of
//     its assignment (a lost response); otherwise FENCED_MEMBER_EPOCH; an
//     unknown member UNKNOWN_MEMBER_ID (clients rejoin with epoch 0).
//   - Members that miss group.consumer.session.timeout.ms (45s) or do not
//     revoke within their rebalance timeout are removed.
//   - A group id in use by a classic group with members gets
//     GROUP_ID_NOT_FOUND ("not a consumer group").
//   - Group state is in memory: after a restart members rejoin (their next
//     heartbeat gets UNKNOWN_MEMBER_ID); committed offsets survive. In a
//     cluster only the owner of the group's key coordinates it: elsewhere
//     NOT_COORDINATOR, and a broker that stops owning a group forgets it
//     (its members rejoin at the new coordinator).
//
// Version notes:
//   - v0: the server generates member ids (not done here: v0 clients must
//     send one too, as every released client does for v1).
//   - v1: client-generated member id, subscribed_topic_regex (RE2 syntax).

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kconsumer"
)

func init() { regKey(68, 0, 1, handleConsumerGroupHeartbeat) }

func handleConsumerGroupHeartbeat(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.HeartbeatIntervalMillis = int32(r.s.consumers.HeartbeatInterval() / time.Millisecond)
	fail := func(code int16, msg string) (kmsg.Response, func() kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		resp.MemberEpoch = -1
		return resp, nil, nil
	}
	if req.Group == "" {
		return fail(kerr.InvalidGroupID.Code, "empty group id")
	}
	if r.s.classicGroupActive(req.Group) {
		return fail(kerr.GroupIDNotFound.Code, "group "+req.Group+" is a classic group with members, not a consumer group")
	}
	hb := kconsumer.Heartbeat{
		MemberID: req.MemberID, Epoch: req.MemberEpoch, InstanceID: req.InstanceID, RackID: req.RackID,
		RebalanceTimeout: -1, Subscribed: req.SubscribedTopicNames, Regex: req.SubscribedTopicRegex,
		Assignor: req.ServerAssignor, ClientID: r.hdr.clientID, Host: r.c.remote,
	}
	if req.RebalanceTimeoutMillis >= 0 {
		hb.RebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.Topics != nil {
		hb.OwnedSet, hb.Owned = true, kconsumer.Assignment{}
		for _, t := range req.Topics {
			ps := append([]int32(nil), t.Partitions...)
			hb.Owned[kconsumer.TopicID(t.TopicID)] = sortedInt32(ps)
		}
	}
	ans := r.s.consumers.Heartbeat(r.ctx, req.Group, hb)
	if ans.Code != 0 {
		return fail(ans.Code, ans.Message)
	}
	id := ans.MemberID
	resp.MemberID, resp.MemberEpoch = &id, ans.Epoch
	if ans.Assignment != nil {
		a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
		for t, ps := range ans.Assignment {
			at := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
			at.TopicID, at.Partitions = t, ps
			a.Topics = append(a.Topics, at)
		}
		resp.Assignment = &a
	}
	return resp, nil, nil
}

func sortedInt32(ps []int32) []int32 {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j] < ps[j-1]; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
	return ps
}
