package kafka

// DescribeAcls: v1-3
//
// Behavior:
//   - Answers the ACL bindings the filter matches (Kafka's filter rules:
//     ANY, MATCH — every pattern that would apply to the named resource —
//     or an exact pattern type; null strings match anything), grouped by
//     resource pattern, from the cluster's ACL set (kafka/kauth, persisted
//     in metadata, shared by every node).
//   - Needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED);
//     without an authorizer configured, SECURITY_DISABLED.
//
// Version notes:
//   - v1: resource pattern types (KIP-290); v0 (literal only) is not
//     served, as in Kafka 4 (KIP-896).
//   - v2: flexible. v3: USER resource type.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kacl"
)

func init() { regKey(29, 1, 3, handleDescribeACLs) }

// errSecurityDisabled is Kafka's message when no authorizer is configured.
const errSecurityDisabled = "No Authorizer is configured."

func handleDescribeACLs(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if r.s.acls == nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, strPtr(errSecurityDisabled)
		return resp, nil, nil
	}
	f := kacl.Filter{ResourceType: kacl.ResourceType(req.ResourceType), ResourceName: req.ResourceName,
		PatternType: kacl.PatternType(req.ResourcePatternType), Principal: req.Principal, Host: req.Host,
		Operation: kacl.Operation(req.Operation), Permission: kacl.Permission(req.PermissionType)}
	if err := f.Validate(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, strPtr(err.Error())
		return resp, nil, nil
	}
	type patternKey struct {
		rt   kacl.ResourceType
		name string
		pt   kacl.PatternType
	}
	idx := map[patternKey]int{}
	for _, b := range r.s.acls.List(f) {
		k := patternKey{b.ResourceType, b.ResourceName, b.PatternType}
		i, ok := idx[k]
		if !ok {
			res := kmsg.NewDescribeACLsResponseResource()
			res.ResourceType, res.ResourceName = kmsg.ACLResourceType(b.ResourceType), b.ResourceName
			res.ResourcePatternType = kmsg.ACLResourcePatternType(b.PatternType)
			resp.Resources = append(resp.Resources, res)
			i = len(resp.Resources) - 1
			idx[k] = i
		}
		acl := kmsg.NewDescribeACLsResponseResourceACL()
		acl.Principal, acl.Host = b.Principal, b.Host
		acl.Operation, acl.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, acl)
	}
	return resp, nil, nil
}
