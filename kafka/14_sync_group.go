package kafka

// SyncGroup: v0-5
//
// Behavior:
//   - The leader's assignments are stored and handed to every member of the
//     generation; followers that sync first wait for the leader. The group
//     becomes Stable when the leader syncs.
//   - A sync for another generation gets ILLEGAL_GENERATION, during a new
//     join phase REBALANCE_IN_PROGRESS, from an unknown member
//     UNKNOWN_MEMBER_ID. Members that have not synced when the pending-sync
//     timeout (the rebalance timeout) expires are removed.
//
// Version notes:
//   - v1: throttle. v2: same. v3: group_instance_id (unused: no static
//     membership). v4: flexible. v5: protocol_type/protocol checked and echoed.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kgroup"
)

func init() { regKey(14, 0, 5, handleSyncGroup) }

func handleSyncGroup(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.SyncGroupRequest)
	reply := make(chan *kmsg.SyncGroupResponse, 1)
	var imm *kmsg.SyncGroupResponse
	err := r.s.groups.Do(req.Group, false, func(g *kgroup.Group, now time.Time) {
		if g == nil {
			imm = req.ResponseKind().(*kmsg.SyncGroupResponse)
			imm.ErrorCode = kerr.UnknownMemberID.Code
			return
		}
		if req.Version >= 3 {
			if c := g.CheckInstance(req.MemberID, req.InstanceID); c != 0 {
				imm = req.ResponseKind().(*kmsg.SyncGroupResponse)
				imm.ErrorCode = c
				return
			}
		}
		imm = g.Sync(now, req, reply)
	})
	if err != nil {
		imm = req.ResponseKind().(*kmsg.SyncGroupResponse)
		imm.ErrorCode = groupErrorCode(err)
	}
	if imm != nil {
		return imm, nil, nil
	}
	return nil, func() kmsg.Response {
		select {
		case resp := <-reply:
			return resp
		case <-r.s.stopping:
		case <-r.ctx.Done():
		}
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = kerr.NotCoordinator.Code
		return resp
	}, nil
}
