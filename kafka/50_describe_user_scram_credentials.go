package kafka

// DescribeUserScramCredentials: v0
//
// Behavior:
//   - Answers each named user's SCRAM mechanisms and iteration counts from
//     the credentials in metadata (kafka/kauth); no users (null or empty)
//     describes every user with a credential. Kafka's per-user errors:
//     RESOURCE_NOT_FOUND for a user without credentials, DUPLICATE_RESOURCE
//     for a user named twice. Salts and keys are never returned.
//
// Version notes:
//   - v0: the only version (KIP-554), flexible.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/ksasl"
)

func init() { regKey(50, 0, 0, handleDescribeUserSCRAMCredentials) }

func handleDescribeUserSCRAMCredentials(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	return nil, func() kmsg.Response {
		ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
		defer cancel()
		var names []string // nil: all
		dup := map[string]bool{}
		var order []string
		for _, u := range req.Users {
			if _, seen := dup[u.Name]; seen {
				dup[u.Name] = true
				continue
			}
			dup[u.Name] = false
			order = append(order, u.Name)
		}
		if len(req.Users) > 0 {
			names = order
		}
		creds, err := r.s.auth.DescribeScram(ctx, names)
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
			return resp
		}
		if names == nil {
			for u := range creds {
				order = append(order, u)
			}
		}
		for _, u := range order {
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.User = u
			switch infos, ok := creds[u]; {
			case dup[u]:
				res.ErrorCode = kerr.DuplicateResource.Code
				res.ErrorMessage = strPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + u)
			case !ok:
				res.ErrorCode = kerr.ResourceNotFound.Code
				res.ErrorMessage = strPtr("attemptToDescribeUserThatDoesNotExist: " + u)
			default:
				for _, in := range infos {
					ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
					ci.Mechanism, ci.Iterations = ksasl.ScramType(in.Mechanism), int32(in.Iterations)
					res.CredentialInfos = append(res.CredentialInfos, ci)
				}
			}
			resp.Results = append(resp.Results, res)
		}
		return resp
	}, nil
}

func strPtr(s string) *string { return &s }
