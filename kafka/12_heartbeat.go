package kafka

// Heartbeat: v0-4
//
// Behavior:
//   - Refreshes the member's session. REBALANCE_IN_PROGRESS during a join
//     phase (the member must rejoin), ILLEGAL_GENERATION for another
//     generation, UNKNOWN_MEMBER_ID for a member the group does not have.
//     Members whose session timeout passes without a heartbeat are removed
//     and the group rebalances.
//
// Version notes:
//   - v1: throttle. v2: same. v3: group_instance_id (unused). v4: flexible.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kgroup"
)

func init() { regKey(12, 0, 4, handleHeartbeat) }

func handleHeartbeat(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	err := r.s.groups.Do(req.Group, false, func(g *kgroup.Group, now time.Time) {
		if g == nil {
			resp.ErrorCode = kerr.UnknownMemberID.Code
			return
		}
		if req.Version >= 3 {
			if c := g.CheckInstance(req.MemberID, req.InstanceID); c != 0 {
				resp.ErrorCode = c
				return
			}
		}
		resp.ErrorCode = g.Heartbeat(now, req.MemberID, req.Generation)
	})
	if err != nil {
		resp.ErrorCode = groupErrorCode(err)
	}
	return resp, nil, nil
}
