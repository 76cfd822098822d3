package kafka

// DeleteGroups: v0-2
//
// Behavior:
//   - A group with members gets NON_EMPTY_GROUP. Otherwise its state (in
//     memory and, for classic and KIP-848 groups alike, stored) is dropped
//     and its committed offsets are deleted from the metadata store. A group with neither members nor offsets gets
//     GROUP_ID_NOT_FOUND.
//
// Version notes:
//   - v1: same as v0. v2: flexible.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kgroup"
)

func init() { regKey(42, 0, 2, handleDeleteGroups) }

func handleDeleteGroups(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = id
		if !r.s.groups.Owns(id) {
			g.ErrorCode = kerr.NotCoordinator.Code
			resp.Groups = append(resp.Groups, g)
			continue
		}
		// A KIP-848 consumer group: refused while it has members, else its
		// stored state goes first, then its offsets below.
		consumerGroup := false
		if _, ok := r.s.consumers.Describe(id); ok {
			deleted, err := r.s.consumers.Delete(r.ctx, id)
			if err != nil || !deleted {
				g.ErrorCode = kerr.NonEmptyGroup.Code
				if err != nil {
					g.ErrorCode = kerr.CoordinatorNotAvailable.Code
				}
				resp.Groups = append(resp.Groups, g)
				continue
			}
			consumerGroup = true
		}
		exists := false
		if err := r.s.groups.Do(id, false, func(gr *kgroup.Group, _ time.Time) {
			exists = gr != nil && gr.State() != kgroup.Dead
		}); err != nil {
			g.ErrorCode = groupErrorCode(err)
			resp.Groups = append(resp.Groups, g)
			continue
		}
		hasOffsets := groupHasOffsets(r.ctx, r.s, id)
		if !exists && !hasOffsets {
			if !consumerGroup {
				g.ErrorCode = kerr.GroupIDNotFound.Code
			}
			resp.Groups = append(resp.Groups, g)
			continue
		}
		switch deleted, err := r.s.groups.Delete(id); {
		case err != nil:
			g.ErrorCode = groupErrorCode(err)
		case !deleted:
			g.ErrorCode = kerr.NonEmptyGroup.Code
		default:
			g.ErrorCode = errorCode(r.s.store.DeleteGroupOffsets(r.ctx, id))
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil, nil
}
