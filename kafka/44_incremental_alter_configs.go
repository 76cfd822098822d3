package kafka

// IncrementalAlterConfigs: v0-1
//
// Behavior:
//   - SET and DELETE (revert to default) topic configs; APPEND and SUBTRACT
//     apply to list-typed configs (cleanup.policy, the throttled-replica
//     lists) and get INVALID_CONFIG on others. Values are validated like
//     CreateTopics; nereus.storage.profile cannot change.
//     retention.ms / retention.bytes are applied to every partition stream's
//     retention.
//   - Broker resources are read-only here: INVALID_REQUEST.
//   - validate_only checks without changing.
//
// Version notes:
//   - v1: flexible.

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kstore"
)

func init() { regKey(44, 0, 1, handleIncrementalAlterConfigs) }

func handleIncrementalAlterConfigs(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		out := kmsg.NewIncrementalAlterConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		if rr.ResourceType != kmsg.ConfigResourceTypeTopic {
			out.ErrorCode = kerr.InvalidRequest.Code
			msg := "nereus: only topic configs can be altered"
			out.ErrorMessage = &msg
			resp.Resources = append(resp.Resources, out)
			continue
		}
		err := r.s.store.AlterConfigs(r.ctx, rr.ResourceName, req.ValidateOnly, func(c kstore.TopicConfigs) error {
			for _, op := range rr.Configs {
				if err := applyIncremental(c, op); err != nil {
					return err
				}
			}
			return nil
		})
		out.ErrorCode, out.ErrorMessage = errorCode(err), errorMessage(err)
		resp.Resources = append(resp.Resources, out)
	}
	return resp, nil, nil
}

func applyIncremental(c kstore.TopicConfigs, op kmsg.IncrementalAlterConfigsRequestResourceConfig) error {
	d, ok := kstore.LookupConfig(op.Name)
	if !ok {
		return fmt.Errorf("%w: unknown topic config %q", kstore.ErrInvalidConfig, op.Name)
	}
	val := ""
	if op.Value != nil {
		val = *op.Value
	}
	switch op.Op {
	case kmsg.IncrementalAlterConfigOpSet:
		c[op.Name] = val
	case kmsg.IncrementalAlterConfigOpDelete:
		if op.Name == kstore.ConfigStorageProfile {
			return fmt.Errorf("%w: %s is fixed at topic creation", kstore.ErrInvalidConfig, op.Name)
		}
		delete(c, op.Name)
	case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
		if d.Type != kstore.TypeList {
			return fmt.Errorf("%w: %s is not a list config", kstore.ErrInvalidConfig, op.Name)
		}
		cur, _ := c.Get(op.Name)
		var items []string
		for _, it := range strings.Split(cur, ",") {
			if it = strings.TrimSpace(it); it != "" {
				items = append(items, it)
			}
		}
		for _, it := range strings.Split(val, ",") {
			it = strings.TrimSpace(it)
			if it == "" {
				continue
			}
			idx := -1
			for i, x := range items {
				if x == it {
					idx = i
				}
			}
			if op.Op == kmsg.IncrementalAlterConfigOpAppend && idx < 0 {
				items = append(items, it)
			}
			if op.Op == kmsg.IncrementalAlterConfigOpSubtract && idx >= 0 {
				items = append(items[:idx], items[idx+1:]...)
			}
		}
		c[op.Name] = strings.Join(items, ",")
	default:
		return fmt.Errorf("%w: unknown operation %d", kstore.ErrInvalidConfig, op.Op)
	}
	return nil
}
