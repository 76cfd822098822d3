package kafka

// AlterConfigs: v0-2
//
// Behavior:
//   - Replaces a topic's explicit configs with the given set (configs not
//     named revert to defaults), as Kafka's legacy AlterConfigs does. Values
//     are validated like CreateTopics; nereus.storage.profile cannot change.
//     retention.ms / retention.bytes are applied to every partition stream's
//     retention.
//   - Broker resources are read-only here: INVALID_REQUEST.
//   - validate_only checks without changing.
//
// Version notes:
//   - v1: same as v0. v2: flexible.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kstore"
)

func init() { regKey(33, 0, 2, handleAlterConfigs) }

func handleAlterConfigs(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		out := kmsg.NewAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		if rr.ResourceType != kmsg.ConfigResourceTypeTopic {
			out.ErrorCode = kerr.InvalidRequest.Code
			msg := "nereus: only topic configs can be altered"
			out.ErrorMessage = &msg
			resp.Resources = append(resp.Resources, out)
			continue
		}
		err := r.s.store.AlterConfigs(r.ctx, rr.ResourceName, req.ValidateOnly, func(c kstore.TopicConfigs) error {
			profile, hadProfile := c[kstore.ConfigStorageProfile]
			for k := range c {
				delete(c, k)
			}
			if hadProfile {
				c[kstore.ConfigStorageProfile] = profile // fixed at creation
			}
			for _, kv := range rr.Configs {
				if kv.Value != nil {
					c[kv.Name] = *kv.Value
				}
			}
			return nil
		})
		out.ErrorCode, out.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Resources = append(resp.Resources, out)
	}
	return resp, nil, nil
}
