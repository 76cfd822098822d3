package kafka

// Metadata: v0-12
//
// Behavior:
//   - One broker: this node, at the advertised host:port. It is also the
//     controller (controller_id), so admin requests that clients route to
//     the controller (Java Admin, kgo/kadm) come here. cluster_id is the
//     configured stable id.
//   - Each partition's leader is this node; its leader_epoch is this
//     broker's append-session epoch on the partition stream (acquired on
//     first use). replicas = isr = [this node]: Nereus durability comes from
//     the storage profile, not from Kafka replicas.
//   - Topics are auto-created with the default partition count when the
//     request allows it (v4+ allow_auto_topic_creation; always for v0-3,
//     like Kafka) unless the server disables it. They are returned ready
//     (no LEADER_NOT_AVAILABLE round).
//   - v0: an empty topic list means all topics; v1+: null means all, empty
//     means none. v10+ topics may be named by id only.
//   - __consumer_offsets and __transaction_state are listed with
//     is_internal (internal_topics.go).
//   - Authorized operations are reported as "all" when asked for (no ACLs),
//     INT32_MIN otherwise.
//
// Version notes:
//   - v1: controller_id, is_internal, rack. v2: cluster_id. v3: throttle.
//   - v4: allow_auto_topic_creation. v5: offline_replicas. v7: leader_epoch.
//   - v8: authorized operations. v9: flexible. v10: topic ids.
//   - v11: cluster authorized operations removed. v12: nullable topic name.

import (
	"context"
	"errors"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kstore"
)

func init() { regKey(3, 0, 12, handleMetadata) }

// allTopicOps is the authorized-operations bitfield for "everything a topic
// supports" (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
// ALTER_CONFIGS); Nereus has no ACLs.
const allTopicOps = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11

func handleMetadata(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	s := r.s
	host, port := r.advertised()
	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = s.cfg.NodeID, host, port
	resp.Brokers = []kmsg.MetadataResponseBroker{b}
	cid := s.cfg.ClusterID
	resp.ClusterID = &cid
	resp.ControllerID = s.cfg.NodeID
	resp.AuthorizedOperations = math.MinInt32

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	autoCreate := !s.cfg.DisableAutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	if all {
		names, err := s.store.ListTopics(r.ctx)
		if err != nil {
			return nil, nil, err
		}
		for _, n := range names {
			t, err := s.store.Topic(r.ctx, n)
			if err != nil {
				continue // deleted meanwhile
			}
			resp.Topics = append(resp.Topics, s.describeTopic(r.ctx, t, req.IncludeTopicAuthorizedOperations))
		}
		return resp, nil, nil
	}
	for _, rt := range req.Topics {
		var t *kstore.Topic
		var err error
		switch {
		case rt.Topic != nil:
			t, err = s.store.Topic(r.ctx, *rt.Topic)
			if errors.Is(err, kstore.ErrUnknownTopic) && autoCreate {
				if verr := s.store.CheckNewTopicName(*rt.Topic); verr != nil {
					err = verr
				} else {
					t, err = s.store.CreateTopic(r.ctx, *rt.Topic, s.cfg.DefaultPartitions, nil, false)
					if errors.Is(err, kstore.ErrTopicExists) {
						t, err = s.store.Topic(r.ctx, *rt.Topic)
					}
				}
			}
		default:
			t, err = s.store.TopicByID(r.ctx, rt.TopicID)
		}
		if err != nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = rt.Topic
			mt.TopicID = rt.TopicID
			mt.ErrorCode = errorCode(err)
			if rt.Topic == nil && mt.ErrorCode == kerr.UnknownTopicOrPartition.Code {
				mt.ErrorCode = kerr.UnknownTopicID.Code
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, s.describeTopic(r.ctx, t, req.IncludeTopicAuthorizedOperations))
	}
	return resp, nil, nil
}

func (s *Server) describeTopic(ctx context.Context, t *kstore.Topic, withOps bool) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = isInternalTopic(t.Name)
	mt.AuthorizedOperations = math.MinInt32
	if withOps {
		mt.AuthorizedOperations = allTopicOps
	}
	node := s.cfg.NodeID
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Index
		mp.Replicas, mp.ISR = []int32{node}, []int32{node}
		mp.OfflineReplicas = []int32{}
		epoch, err := s.store.LeaderEpoch(ctx, p)
		if err != nil {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
			mp.Leader, mp.LeaderEpoch = -1, -1
		} else {
			mp.Leader, mp.LeaderEpoch = node, epoch
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
