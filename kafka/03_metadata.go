package kafka

// Metadata: v0-12
//
// Behavior:
//   - Brokers: every broker registered in the cluster (this node's view),
//     each with its own Kafka broker id, advertised host:port and rack.
//     The controller (controller_id) is the active broker with the lowest
//     id; any broker serves admin requests (topic metadata is in the shared
//     metadata store). cluster_id is the configured stable id.
//   - Each partition's leader is the broker that owns the partition's
//     stream (rendezvous hashing over the active brokers); leader_epoch is
//     the epoch of the stream's current append session, read from its head
//     — answering Metadata never takes a session. replicas = isr = every
//     active broker, leader first: storage is shared, so every broker can
//     serve fetches (KIP-392 follower fetching picks one by rack), while
//     durability comes from the storage profile, not from Kafka replicas.
//   - A partition whose leader is unknown (no active broker in the view)
//     is LEADER_NOT_AVAILABLE.
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
	"errors"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/cluster"
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
	// A peer whose connection just closed may lead partitions: answer
	// after the verdict, so a client's first refresh after a broker
	// crashed already names the new leaders (cluster.Node.Settle).
	s.cluster.Settle(r.ctx)
	resp.Brokers = r.metadataBrokers()
	cid := s.cfg.ClusterID
	resp.ClusterID = &cid
	resp.ControllerID = r.controllerID()
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
			resp.Topics = append(resp.Topics, r.describeTopic(t, req.IncludeTopicAuthorizedOperations))
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
		resp.Topics = append(resp.Topics, r.describeTopic(t, req.IncludeTopicAuthorizedOperations))
	}
	return resp, nil, nil
}

func (r *request) describeTopic(t *kstore.Topic, withOps bool) kmsg.MetadataResponseTopic {
	s, ctx := r.s, r.ctx
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = isInternalTopic(t.Name)
	mt.AuthorizedOperations = math.MinInt32
	if withOps {
		mt.AuthorizedOperations = allTopicOps
	}
	replicas := r.activeKafkaIDs()
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.Index
		mp.OfflineReplicas = []int32{}
		mp.Leader, mp.LeaderEpoch = -1, -1
		leader, ok := s.store.Leader(p)
		_, _, reachable := r.kafkaEndpoint(leader)
		epoch, err := s.store.LeaderEpoch(ctx, p)
		switch {
		case !ok || !reachable:
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		case err != nil:
			mp.ErrorCode = errorCode(err)
		default:
			mp.Leader, mp.LeaderEpoch = leader.KafkaID, epoch
		}
		mp.Replicas = leaderFirst(replicas, mp.Leader)
		mp.ISR = mp.Replicas
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// kafkaEndpoint is where the client of this request reaches broker b:
// for this broker the advertised address of the listener the client came
// through, for another broker its registered Kafka endpoint of the
// listener with the same name (its first Kafka endpoint if it has none of
// that name).
func (r *request) kafkaEndpoint(b cluster.Broker) (string, int32, bool) {
	if b.NodeID == "" {
		return "", 0, false
	}
	if b.NodeID == r.s.cluster.NodeID() {
		h, p := r.advertised()
		return h, p, true
	}
	e, ok := b.Endpoint(cluster.ProtocolKafka, r.c.ln.Spec().Name)
	if !ok {
		e, ok = b.Endpoint(cluster.ProtocolKafka, "")
	}
	if !ok {
		return "", 0, false
	}
	return e.Host, int32(e.Port), true
}

// metadataBrokers lists every registered broker the client can reach
// (this one always, even before its own registration shows in its view).
func (r *request) metadataBrokers() []kmsg.MetadataResponseBroker {
	s := r.s
	v := s.cluster.View()
	var out []kmsg.MetadataResponseBroker
	self := false
	for _, b := range v.Brokers {
		host, port, ok := r.kafkaEndpoint(b)
		if !ok {
			continue
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = b.KafkaID, host, port
		if b.Rack != "" {
			rack := b.Rack
			mb.Rack = &rack
		}
		self = self || b.NodeID == s.cluster.NodeID()
		out = append(out, mb)
	}
	if !self {
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID = s.cfg.NodeID
		mb.Host, mb.Port = r.advertised()
		out = append(out, mb)
	}
	return out
}

// activeKafkaIDs are the broker ids of the active brokers the client can
// reach, in id order.
func (r *request) activeKafkaIDs() []int32 {
	var ids []int32
	for _, b := range r.s.cluster.View().Active() {
		if _, _, ok := r.kafkaEndpoint(b); ok {
			ids = append(ids, b.KafkaID)
		}
	}
	return ids
}

// controllerID is the active broker with the lowest id (this broker when
// it sees none).
func (r *request) controllerID() int32 {
	if ids := r.activeKafkaIDs(); len(ids) > 0 {
		return ids[0]
	}
	return r.s.cfg.NodeID
}

func leaderFirst(ids []int32, leader int32) []int32 {
	out := make([]int32, 0, len(ids)+1)
	if leader >= 0 {
		out = append(out, leader)
	}
	for _, id := range ids {
		if id != leader {
			out = append(out, id)
		}
	}
	return out
}
