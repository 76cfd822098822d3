package kafka

// DeleteGroups: v0-2
//
// Behavior:
//   - A group with members gets NON_EMPTY_GROUP. Otherwise its in-memory
//     state is dropped and its committed offsets are deleted from the
//     metadata store. A group with neither members nor offsets gets
//     GROUP_ID_NOT_FOUND.
//
// Version notes:
//   - v1: same as v0. v2: flexible.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(42, 0, 2, handleDeleteGroups) }

func handleDeleteGroups(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = id
		inMemory := false
		for _, sm := range r.s.groups.List() {
			if sm.ID == id {
				inMemory = true
			}
		}
		hasOffsets := groupHasOffsets(r.ctx, r.s, id)
		switch {
		case !inMemory && !hasOffsets:
			g.ErrorCode = kerr.GroupIDNotFound.Code
		case !r.s.groups.Delete(id):
			g.ErrorCode = kerr.NonEmptyGroup.Code
		default:
			g.ErrorCode = errorCode(r.s.store.DeleteGroupOffsets(r.ctx, id))
		}
		resp.Groups = append(resp.Groups, g)
	}
	return resp, nil, nil
}
