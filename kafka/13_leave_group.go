package kafka

// LeaveGroup: v0-5
//
// Behavior:
//   - Removes the member(s); the rest of the group rebalances (a group left
//     without members becomes Empty with a new generation). v3+ batches
//     members and answers each; a member named only by group_instance_id
//     gets UNKNOWN_MEMBER_ID (no static membership).
//
// Version notes:
//   - v1: throttle. v2: same. v3: batched members. v4: flexible. v5: reason.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kgroup"
)

func init() { regKey(13, 0, 5, handleLeaveGroup) }

func handleLeaveGroup(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	err := r.s.groups.Do(req.Group, false, func(g *kgroup.Group, now time.Time) {
		if req.Version < 3 {
			if g == nil {
				resp.ErrorCode = kerr.UnknownMemberID.Code
				return
			}
			resp.ErrorCode = g.Leave(now, req.MemberID)
			return
		}
		for _, m := range req.Members {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
			switch {
			case g == nil:
				rm.ErrorCode = kerr.UnknownMemberID.Code
			case m.InstanceID != nil && *m.InstanceID != "":
				rm.ErrorCode = g.LeaveInstance(now, m.MemberID, *m.InstanceID)
			default:
				rm.ErrorCode = g.Leave(now, m.MemberID)
			}
			resp.Members = append(resp.Members, rm)
		}
	})
	if err != nil {
		resp.ErrorCode = groupErrorCode(err)
		resp.Members = nil
	}
	return resp, nil, nil
}
