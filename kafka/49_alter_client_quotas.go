package kafka

// AlterClientQuotas: v0-1
//
// Behavior:
//   - Sets or removes quota values per entity (user, client-id, both, or
//     ip; a null name is the type's default entity), persisted in the
//     metadata store (one CAS'd record per entity; an entity left without
//     values is deleted). Keys: producer_byte_rate and consumer_byte_rate
//     (enforced by this broker: throttle_time_ms, quota.go),
//     request_percentage and controller_mutation_rate (stored, not
//     enforced), connection_creation_rate for ip entities (stored, not
//     enforced). Unknown keys or types, bad combinations and non-positive
//     values get INVALID_REQUEST per entry. validate_only checks only.
//   - This broker applies changes at once; other brokers sharing the
//     metadata store within 5 seconds.
//
// Version notes:
//   - v1: flexible.

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kstore"
)

func init() { regKey(49, 0, 1, handleAlterClientQuotas) }

func handleAlterClientQuotas(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, e := range req.Entries {
		out := kmsg.NewAlterClientQuotasResponseEntry()
		ent := make([]kstore.QuotaEntityPart, len(e.Entity))
		for i, p := range e.Entity {
			ent[i] = kstore.QuotaEntityPart{Type: p.Type, Name: p.Name}
			re := kmsg.NewAlterClientQuotasResponseEntryEntity()
			re.Type, re.Name = p.Type, p.Name
			out.Entity = append(out.Entity, re)
		}
		ops := make([]kstore.QuotaOp, len(e.Ops))
		for i, op := range e.Ops {
			ops[i] = kstore.QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove}
		}
		if err := r.s.store.AlterQuota(r.ctx, ent, ops, req.ValidateOnly); err != nil {
			out.ErrorCode = errorCode(err)
			if errors.Is(err, kstore.ErrInvalidQuota) {
				out.ErrorCode = kerr.InvalidRequest.Code
			}
			out.ErrorMessage = errorMessage(err)
		}
		resp.Entries = append(resp.Entries, out)
	}
	if !req.ValidateOnly {
		r.s.quotas.invalidate()
	}
	return resp, nil, nil
}
