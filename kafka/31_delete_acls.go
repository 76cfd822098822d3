package kafka

// DeleteAcls: v1-3
//
// Behavior:
//   - Each filter (DescribeAcls' rules) deletes every binding it matches
//     and answers them as matching_acls; filters are applied in order.
//     An invalid filter answers INVALID_REQUEST for that filter only.
//   - Needs ALTER on the cluster (else every result is
//     CLUSTER_AUTHORIZATION_FAILED); without an authorizer,
//     SECURITY_DISABLED.
//
// Version notes:
//   - v1: resource pattern types; v0 not served (KIP-896). v2: flexible.
//     v3: USER resource type.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kacl"
)

func init() { regKey(31, 1, 3, handleDeleteACLs) }

func handleDeleteACLs(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	if r.s.acls == nil {
		for range req.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = kerr.SecurityDisabled.Code, strPtr(errSecurityDisabled)
			resp.Results = append(resp.Results, res)
		}
		return resp, nil, nil
	}
	return nil, func() kmsg.Response {
		ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
		defer cancel()
		for _, rf := range req.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			f := kacl.Filter{ResourceType: kacl.ResourceType(rf.ResourceType), ResourceName: rf.ResourceName,
				PatternType: kacl.PatternType(rf.ResourcePatternType), Principal: rf.Principal, Host: rf.Host,
				Operation: kacl.Operation(rf.Operation), Permission: kacl.Permission(rf.PermissionType)}
			if err := f.Validate(); err != nil {
				res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, strPtr(err.Error())
				resp.Results = append(resp.Results, res)
				continue
			}
			deleted, err := r.s.acls.Delete(ctx, f)
			if err != nil {
				res.ErrorCode, res.ErrorMessage = errorCode(err), errorMessage(err)
			}
			for _, b := range deleted {
				m := kmsg.NewDeleteACLsResponseResultMatchingACL()
				m.ResourceType, m.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.ResourceName
				m.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
				m.Principal, m.Host = b.Principal, b.Host
				m.Operation, m.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
				res.MatchingACLs = append(res.MatchingACLs, m)
			}
			if len(deleted) > 0 {
				r.s.log.Info("kafka: ACLs deleted", "count", len(deleted), "by", r.principal())
			}
			resp.Results = append(resp.Results, res)
		}
		return resp
	}, nil
}
