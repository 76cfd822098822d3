package kafka

// CreateAcls: v1-3
//
// Behavior:
//   - Each creation is validated as Kafka does (LITERAL or PREFIXED
//     pattern, a concrete operation and permission, a non-empty resource
//     name, "Type:name" principal, the cluster resource named
//     kafka-cluster) — INVALID_REQUEST with Kafka's message otherwise —
//     then persisted (kafka/kauth: one metadata record per binding,
//     create-if-absent, so creating an existing ACL succeeds). The result
//     list is in creation order.
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

func init() { regKey(30, 1, 3, handleCreateACLs) }

func handleCreateACLs(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	if r.s.acls == nil {
		for range req.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = kerr.SecurityDisabled.Code, strPtr(errSecurityDisabled)
			resp.Results = append(resp.Results, res)
		}
		return resp, nil, nil
	}
	return nil, func() kmsg.Response {
		ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
		defer cancel()
		for _, c := range req.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			b := kacl.Binding{ResourceType: kacl.ResourceType(c.ResourceType), ResourceName: c.ResourceName,
				PatternType: kacl.PatternType(c.ResourcePatternType), Principal: c.Principal, Host: c.Host,
				Operation: kacl.Operation(c.Operation), Permission: kacl.Permission(c.PermissionType)}
			if err := b.Validate(); err != nil {
				res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, strPtr(err.Error())
			} else if err := r.s.acls.Create(ctx, b); err != nil {
				res.ErrorCode, res.ErrorMessage = errorCode(err), errorMessage(err)
			} else {
				r.s.log.Info("kafka: ACL created", "acl", b.String(), "by", r.principal())
			}
			resp.Results = append(resp.Results, res)
		}
		return resp
	}, nil
}
