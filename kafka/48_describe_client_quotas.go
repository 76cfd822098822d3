package kafka

// DescribeClientQuotas: v0-1
//
// Behavior:
//   - Returns the stored quota entities (metadata store, package kstore)
//     that match every filter component: match_type 0 an entity of that
//     type with exactly that name, 1 the type's default entity, 2 any
//     entity of that type. strict excludes entities with components of
//     other types. An unknown entity type or a type filtered twice is
//     INVALID_REQUEST.
//
// Version notes:
//   - v1: flexible.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kstore"
)

func init() { regKey(48, 0, 1, handleDescribeClientQuotas) }

func handleDescribeClientQuotas(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	byType := map[string]kmsg.DescribeClientQuotasRequestComponent{}
	for _, c := range req.Components {
		switch c.EntityType {
		case kstore.QuotaUser, kstore.QuotaClientID, kstore.QuotaIP:
		default:
			return quotaDescribeError(resp, "unknown entity type "+c.EntityType), nil, nil
		}
		if _, dup := byType[c.EntityType]; dup {
			return quotaDescribeError(resp, "entity type "+c.EntityType+" filtered twice"), nil, nil
		}
		if c.MatchType == 0 && c.Match == nil {
			return quotaDescribeError(resp, "exact match without a name"), nil, nil
		}
		byType[c.EntityType] = c
	}
	entries, err := r.s.store.ListQuotas(r.ctx)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp, nil, nil
	}
	// Entries is nullable on the wire: null means "error"; an empty
	// answer must be an empty array (Kafka's ConfigCommand dereferences it).
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	for _, e := range entries {
		if !quotaMatches(e.Entity, byType, req.Strict) {
			continue
		}
		var out kmsg.DescribeClientQuotasResponseEntry
		for _, p := range e.Entity {
			ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = p.Type, p.Name
			out.Entity = append(out.Entity, ent)
		}
		keys := make([]string, 0, len(e.Values))
		for k := range e.Values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, e.Values[k]
			out.Values = append(out.Values, v)
		}
		resp.Entries = append(resp.Entries, out)
	}
	return resp, nil, nil
}

func quotaDescribeError(resp *kmsg.DescribeClientQuotasResponse, msg string) *kmsg.DescribeClientQuotasResponse {
	resp.ErrorCode = kerr.InvalidRequest.Code
	resp.ErrorMessage = &msg
	return resp
}

func quotaMatches(entity []kstore.QuotaEntityPart, filters map[string]kmsg.DescribeClientQuotasRequestComponent, strict bool) bool {
	if strict && len(entity) != len(filters) {
		return false
	}
	for typ, f := range filters {
		found := false
		for _, p := range entity {
			if p.Type != typ {
				continue
			}
			switch f.MatchType {
			case 0:
				found = p.Name != nil && f.Match != nil && *p.Name == *f.Match
			case 1:
				found = p.Name == nil
			default:
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}
