package kafka

// JoinGroup: v0-9
//
// Behavior:
//   - Classic group protocol (package kgroup): a join moves the group to
//     PreparingRebalance; the join phase completes when every known member
//     has rejoined or the rebalance timeout (max over members) expires,
//     dropping members that did not rejoin. The protocol is chosen by vote
//     among protocols every member supports; the first joiner leads and gets
//     every member's metadata.
//   - A member joining without an id gets one ("<client.id>-<uuid>") in the
//     response; MEMBER_ID_REQUIRED (KIP-394) is not used.
//   - Session timeouts outside [MinSessionTimeout, MaxSessionTimeout]
//     (default 6s-30m) get INVALID_SESSION_TIMEOUT.
//   - No initial rebalance delay (group.initial.rebalance.delay.ms): the first
//     member to join an empty group forms a generation at once.
//   - Static membership (KIP-345, group.instance.id, v5+): a restarted
//     instance joining without a member id takes over its member (new id,
//     same assignment, same place and leadership); with unchanged metadata
//     in a Stable group there is no rebalance (a leader gets the member
//     list with skip_assignment, v9). The superseded id gets
//     FENCED_INSTANCE_ID on every request (JoinGroup, Heartbeat, SyncGroup,
//     OffsetCommit, TxnOffsetCommit, LeaveGroup). Static members are kept
//     across coordinator failover (their instance ids are in the persisted
//     group snapshot).
//   - A group id that a KIP-848 consumer group uses gets
//     INCONSISTENT_GROUP_PROTOCOL.
//   - On shutdown a waiting join is answered NOT_COORDINATOR so the client
//     rediscovers the coordinator.
//
// Version notes:
//   - v0: kafka-go legacy, librdkafka < 2.11 GSSAPI feature needs v0 in range.
//   - v1: rebalance_timeout_ms. v2: throttle. v3: same.
//   - v4: MEMBER_ID_REQUIRED allowed (not used).
//   - v5: group_instance_id. v6: flexible. v7: protocol type and name in
//     the response. v8: reason (ignored). v9: skip_assignment.

import (
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kgroup"
	"time"
)

func init() { regKey(11, 0, 9, handleJoinGroup) }

func clientHost(c *conn) string {
	if ta, ok := c.nc.RemoteAddr().(*net.TCPAddr); ok {
		return "/" + ta.IP.String()
	}
	return "/" + c.remote
}

func handleJoinGroup(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.JoinGroupRequest)
	if req.Group == "" || r.s.consumers.Exists(req.Group) {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.InvalidGroupID.Code
		if req.Group != "" {
			resp.ErrorCode = kerr.InconsistentGroupProtocol.Code // a KIP-848 group uses the id
		}
		resp.Generation = -1
		return resp, nil, nil
	}
	reply := make(chan *kmsg.JoinGroupResponse, 1)
	var imm *kmsg.JoinGroupResponse
	clientID := r.hdr.clientID
	err := r.s.groups.Do(req.Group, true, func(g *kgroup.Group, now time.Time) {
		if g == nil {
			imm = req.ResponseKind().(*kmsg.JoinGroupResponse)
			imm.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return
		}
		prefix := clientID
		if req.Version >= 5 && req.InstanceID != nil && *req.InstanceID != "" {
			prefix = *req.InstanceID // Kafka names static members <instance>-<uuid>
		}
		imm = g.Join(now, req, clientID, clientHost(r.c), kgroup.NewMemberID(prefix), reply)
	})
	if err != nil {
		imm = req.ResponseKind().(*kmsg.JoinGroupResponse)
		imm.ErrorCode = groupErrorCode(err)
		imm.MemberID = req.MemberID
		imm.Generation = -1
	}
	if imm != nil {
		return imm, nil, nil
	}
	return nil, func() kmsg.Response {
		select {
		case resp := <-reply:
			if resp.ErrorCode == 0 {
				r.s.stats.GroupRebalances.Add(1)
			}
			return resp
		case <-r.s.stopping:
		case <-r.ctx.Done():
		}
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = kerr.NotCoordinator.Code
		resp.Generation = -1
		return resp
	}, nil
}
