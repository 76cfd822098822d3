package kafka

// DescribeGroups: v0-5
//
// Behavior:
//   - Groups with members report their state, protocol and members (with
//     metadata of the chosen protocol and assignments). A group that only
//     has committed offsets is Empty; an unknown group is Dead with no error
//     (Kafka's answer before v6).
//   - authorized_operations (v3+) is "all" when asked (no ACLs), INT32_MIN
//     otherwise.
//
// Version notes:
//   - v1: throttle. v2: same. v3: authorized operations.
//   - v4: group_instance_id per member (always null). v5: flexible.

import (
	"context"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kgroup"
)

func init() { regKey(15, 0, 5, handleDescribeGroups) }

const allGroupOps = 1<<3 | 1<<6 | 1<<8 // READ, DELETE, DESCRIBE

func handleDescribeGroups(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		d := kmsg.NewDescribeGroupsResponseGroup()
		d.Group = id
		d.State = "Dead"
		d.AuthorizedOperations = math.MinInt32
		if req.IncludeAuthorizedOperations {
			d.AuthorizedOperations = allGroupOps
		}
		found := false
		err := r.s.groups.Do(id, false, func(g *kgroup.Group, now time.Time) {
			if g != nil && g.State() != kgroup.Dead {
				g.Describe(&d)
				found = true
			}
		})
		if err != nil {
			d.ErrorCode = groupErrorCode(err)
			d.State = ""
		} else if !found && groupHasOffsets(r.ctx, r.s, id) {
			d.State = "Empty"
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp, nil, nil
}

func groupHasOffsets(ctx context.Context, s *Server, id string) bool {
	offs, err := s.store.FetchOffsets(ctx, id)
	return err == nil && len(offs) > 0
}
