package kafka

// ListGroups: v0-5
//
// Behavior:
//   - Lists groups with members — KIP-848 consumer groups (group_type
//     "consumer", states Assigning/Reconciling/Stable) and classic groups —
//     and groups that only have committed offsets (state Empty, type
//     classic).
//   - v4 states_filter and v5 types_filter are applied (case-insensitive, as
//     Kafka does).
//
// Version notes:
//   - v1: throttle. v2: same. v3: flexible. v4: states filter + group_state.
//   - v5: types filter + group_type.

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { regKey(16, 0, 5, handleListGroups) }

func handleListGroups(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	seen := map[string]bool{}
	add := func(id, protocolType, state, typ string) {
		if seen[id] {
			return
		}
		seen[id] = true
		if len(req.StatesFilter) > 0 && !containsFold(req.StatesFilter, state) {
			return
		}
		if len(req.TypesFilter) > 0 && !containsFold(req.TypesFilter, typ) {
			return
		}
		g := kmsg.NewListGroupsResponseGroup()
		g.Group, g.ProtocolType, g.GroupState, g.GroupType = id, protocolType, state, typ
		resp.Groups = append(resp.Groups, g)
	}
	for _, g := range r.s.consumers.List() {
		if g.State != "Empty" {
			add(g.ID, "consumer", g.State, "consumer")
		}
	}
	for _, g := range r.s.groups.List() {
		add(g.ID, g.ProtocolType, g.State.String(), "classic")
	}
	ids, err := r.s.store.GroupsWithOffsets(r.ctx)
	if err != nil {
		resp.ErrorCode = errorCode(err)
		return resp, nil, nil
	}
	for _, id := range ids {
		// Like Kafka, each broker lists the groups it coordinates;
		// clients ask every broker and merge.
		if r.s.groups.Owns(id) {
			add(id, "consumer", "Empty", "classic")
		}
	}
	return resp, nil, nil
}

func containsFold(xs []string, s string) bool {
	for _, x := range xs {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
