package kafka

// CreateTopics: v0-7
//
// Behavior:
//   - Each partition becomes a stream "kafka/<topic>/<partition>" created
//     with the topic's storage profile (config nereus.storage.profile,
//     default OBJECT_WAL_ASYNC_OBJECT). A profile whose provider this server
//     does not run is refused with INVALID_CONFIG and a message naming it.
//   - num_partitions -1 takes the server default. replication_factor may be
//     -1 or any positive value and is reported as 1: durability is the
//     storage profile's, there are no Kafka replicas. Manual replica
//     assignments are accepted only if they name this broker alone.
//   - Configs are validated against the known topic configs (kstore); an
//     unknown name or an unsupported value (compression.type other than
//     producer) gets INVALID_CONFIG. cleanup.policy=compact is accepted
//     (see kstore's config doc: compact-only topics have no retention).
//   - validate_only checks without creating. timeout_ms is ignored: the
//     topic is ready when the response is sent.
//   - A name repeated within one request gets INVALID_REQUEST.
//
// Version notes:
//   - v1: validate_only, error messages. v2: throttle. v3: same.
//   - v4: -1 defaults (KIP-464). v5: flexible; response echoes partitions,
//     replication factor and configs. v6: same. v7: topic id.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kstore"
)

func init() { regKey(19, 0, 7, handleCreateTopics) }

func handleCreateTopics(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	count := map[string]int{}
	for _, t := range req.Topics {
		count[t.Topic]++
	}
	for _, rt := range req.Topics {
		ot := kmsg.NewCreateTopicsResponseTopic()
		ot.Topic = rt.Topic
		ot.NumPartitions, ot.ReplicationFactor = -1, -1
		err := createTopic(r.ctx, r.s, &rt, req.ValidateOnly, count[rt.Topic] > 1, &ot)
		if err != nil {
			ot.ErrorCode = errorCode(err)
			if err == errDuplicateTopic {
				ot.ErrorCode = kerr.InvalidRequest.Code
			}
			if req.Version >= 1 {
				ot.ErrorMessage = errorMessage(err)
			}
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil, nil
}

var (
	errDuplicateTopic = fmt.Errorf("kafka: topic named more than once in the request")
	errAssignment     = fmt.Errorf("kafka: replica assignment must name only this broker: %w", kstore.ErrInvalidPartitions)
)

func createTopic(ctx context.Context, s *Server, rt *kmsg.CreateTopicsRequestTopic, validateOnly, dup bool, ot *kmsg.CreateTopicsResponseTopic) error {
	if dup {
		return errDuplicateTopic
	}
	n := rt.NumPartitions
	if len(rt.ReplicaAssignment) > 0 {
		if n != -1 || rt.ReplicationFactor != -1 {
			return fmt.Errorf("%w: both partitions/replication factor and an assignment given", kstore.ErrInvalidPartitions)
		}
		for i, a := range rt.ReplicaAssignment {
			if a.Partition != int32(i) || len(a.Replicas) != 1 || a.Replicas[0] != s.cfg.NodeID {
				return errAssignment
			}
		}
		n = int32(len(rt.ReplicaAssignment))
	}
	if n == -1 {
		n = s.cfg.DefaultPartitions
	}
	if rt.ReplicationFactor == 0 || rt.ReplicationFactor < -1 {
		return fmt.Errorf("%w: replication factor %d", errInvalidRF, rt.ReplicationFactor)
	}
	cfgs := kstore.TopicConfigs{}
	for _, c := range rt.Configs {
		if c.Value != nil {
			cfgs[c.Name] = *c.Value
		}
	}
	t, err := s.store.CreateTopic(ctx, rt.Topic, n, cfgs, validateOnly)
	if err != nil {
		return err
	}
	ot.TopicID = t.ID
	ot.NumPartitions, ot.ReplicationFactor = n, 1
	for _, d := range kstore.ConfigDefs() {
		v, explicit := cfgs.Get(d.Name)
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name = d.Name
		val := v
		c.Value = &val
		c.ReadOnly = d.ReadOnly
		c.Source = int8(kmsg.ConfigSourceDefaultConfig)
		if explicit {
			c.Source = int8(kmsg.ConfigSourceDynamicTopicConfig)
		}
		ot.Configs = append(ot.Configs, c)
	}
	return nil
}
