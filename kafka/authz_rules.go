package kafka

// The authorization rule of every API key: which resources a request names
// and which operation each needs, with Kafka's error for each denial (as
// KafkaApis / ControllerApis answer them). See authz.go for how rules are
// applied.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kacl"
	"github.com/nereusstream/nereus-go/kafka/kstore"
)

const (
	topicDenied   = int16(29) // TOPIC_AUTHORIZATION_FAILED
	groupDenied   = int16(30) // GROUP_AUTHORIZATION_FAILED
	clusterDenied = int16(31) // CLUSTER_AUTHORIZATION_FAILED
	txnDenied     = int16(53) // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
)

const (
	opRead            = kacl.OpRead
	opWrite           = kacl.OpWrite
	opCreate          = kacl.OpCreate
	opDelete          = kacl.OpDelete
	opAlter           = kacl.OpAlter
	opDescribe        = kacl.OpDescribe
	opClusterAction   = kacl.OpClusterAction
	opDescribeConfigs = kacl.OpDescribeConfigs
	opAlterConfigs    = kacl.OpAlterConfigs
	opIdempotentWrite = kacl.OpIdempotentWrite
	rtTopic           = kacl.ResourceTopic
	rtGroup           = kacl.ResourceGroup
	rtTxn             = kacl.ResourceTransactionalID
)

// open: the API needs no authorization (ApiVersions, the SASL exchange).
func open(*authzCtx) authzDecision { return authzDecision{} }

// clusterOnly: the whole request needs op on the cluster; set applies the
// error to the blank answer.
func clusterOnly(op kacl.Operation, set func(kmsg.Response)) authzRule {
	return func(z *authzCtx) authzDecision {
		if z.cluster(op) {
			return authzDecision{}
		}
		resp := z.r.kreq.ResponseKind()
		set(resp)
		return authzDecision{deny: resp}
	}
}

// groupOnly: the whole request needs op on one group.
func groupOnly(op kacl.Operation, group func(kmsg.Request) string, set func(kmsg.Response)) authzRule {
	return func(z *authzCtx) authzDecision {
		if z.ok(op, rtGroup, group(z.r.kreq)) {
			return authzDecision{}
		}
		resp := z.r.kreq.ResponseKind()
		set(resp)
		return authzDecision{deny: resp}
	}
}

func init() {
	regAuthz(18, open) // ApiVersions
	regAuthz(17, open) // SaslHandshake
	regAuthz(36, open) // SaslAuthenticate

	regAuthz(0, authzProduce)
	regAuthz(1, authzFetch)
	regAuthz(2, authzListOffsets)
	regAuthz(3, authzMetadata)
	regAuthz(8, authzOffsetCommit)
	regAuthz(9, authzOffsetFetch)
	regAuthz(10, authzFindCoordinator)
	regAuthz(11, groupOnly(opRead, func(q kmsg.Request) string { return q.(*kmsg.JoinGroupRequest).Group },
		func(p kmsg.Response) {
			r := p.(*kmsg.JoinGroupResponse)
			r.ErrorCode, r.Generation = groupDenied, -1
		}))
	regAuthz(12, groupOnly(opRead, func(q kmsg.Request) string { return q.(*kmsg.HeartbeatRequest).Group },
		func(p kmsg.Response) { p.(*kmsg.HeartbeatResponse).ErrorCode = groupDenied }))
	regAuthz(13, groupOnly(opRead, func(q kmsg.Request) string { return q.(*kmsg.LeaveGroupRequest).Group },
		func(p kmsg.Response) { p.(*kmsg.LeaveGroupResponse).ErrorCode = groupDenied }))
	regAuthz(14, groupOnly(opRead, func(q kmsg.Request) string { return q.(*kmsg.SyncGroupRequest).Group },
		func(p kmsg.Response) { p.(*kmsg.SyncGroupResponse).ErrorCode = groupDenied }))
	regAuthz(15, authzDescribeGroups)
	regAuthz(16, authzListGroups)
	regAuthz(19, authzCreateTopics)
	regAuthz(20, authzDeleteTopics)
	regAuthz(21, authzDeleteRecords)
	regAuthz(22, authzInitProducerID)
	regAuthz(23, authzOffsetForLeaderEpoch)
	regAuthz(24, authzAddPartitionsToTxn)
	regAuthz(25, authzAddOffsetsToTxn)
	regAuthz(26, func(z *authzCtx) authzDecision {
		if z.ok(opWrite, rtTxn, z.r.kreq.(*kmsg.EndTxnRequest).TransactionalID) {
			return authzDecision{}
		}
		resp := z.r.kreq.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = txnDenied
		return authzDecision{deny: resp}
	})
	regAuthz(28, authzTxnOffsetCommit)
	regAuthz(29, clusterOnly(opDescribe, func(p kmsg.Response) {
		r := p.(*kmsg.DescribeACLsResponse)
		r.ErrorCode, r.ErrorMessage = clusterDenied, strPtr(kerr.ClusterAuthorizationFailed.Message)
	}))
	regAuthz(30, func(z *authzCtx) authzDecision {
		if z.cluster(opAlter) {
			return authzDecision{}
		}
		req := z.r.kreq.(*kmsg.CreateACLsRequest)
		resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
		for range req.Creations {
			res := kmsg.NewCreateACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = clusterDenied, strPtr(kerr.ClusterAuthorizationFailed.Message)
			resp.Results = append(resp.Results, res)
		}
		return authzDecision{deny: resp}
	})
	regAuthz(31, func(z *authzCtx) authzDecision {
		if z.cluster(opAlter) {
			return authzDecision{}
		}
		req := z.r.kreq.(*kmsg.DeleteACLsRequest)
		resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
		for range req.Filters {
			res := kmsg.NewDeleteACLsResponseResult()
			res.ErrorCode, res.ErrorMessage = clusterDenied, strPtr(kerr.ClusterAuthorizationFailed.Message)
			resp.Results = append(resp.Results, res)
		}
		return authzDecision{deny: resp}
	})
	regAuthz(32, authzDescribeConfigs)
	regAuthz(33, authzAlterConfigs)
	regAuthz(35, clusterOnly(opDescribe, func(p kmsg.Response) { p.(*kmsg.DescribeLogDirsResponse).ErrorCode = clusterDenied }))
	regAuthz(37, authzCreatePartitions)
	regAuthz(42, authzDeleteGroups)
	regAuthz(43, clusterOnly(opAlter, func(p kmsg.Response) { p.(*kmsg.ElectLeadersResponse).ErrorCode = clusterDenied }))
	regAuthz(44, authzIncrementalAlterConfigs)
	regAuthz(46, clusterOnly(opDescribe, func(p kmsg.Response) { p.(*kmsg.ListPartitionReassignmentsResponse).ErrorCode = clusterDenied }))
	regAuthz(47, authzOffsetDelete)
	regAuthz(48, clusterOnly(opDescribeConfigs, func(p kmsg.Response) {
		r := p.(*kmsg.DescribeClientQuotasResponse)
		r.ErrorCode, r.ErrorMessage = clusterDenied, strPtr(kerr.ClusterAuthorizationFailed.Message)
	}))
	regAuthz(49, authzAlterClientQuotas)
	regAuthz(50, clusterOnly(opDescribe, func(p kmsg.Response) {
		r := p.(*kmsg.DescribeUserSCRAMCredentialsResponse)
		r.ErrorCode, r.ErrorMessage = clusterDenied, strPtr(kerr.ClusterAuthorizationFailed.Message)
	}))
	regAuthz(51, authzAlterUserSCRAM)
	regAuthz(60, authzDescribeCluster)
	regAuthz(61, authzDescribeProducers)
	regAuthz(65, authzDescribeTransactions)
	regAuthz(66, authzListTransactions)
	regAuthz(75, authzDescribeTopicPartitions)
}

// ---- topic-partition APIs ----

func authzProduce(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.ProduceRequest)
	if req.TransactionID != nil && !z.ok(opWrite, rtTxn, *req.TransactionID) {
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.BaseOffset = p.Partition, txnDenied, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return authzDecision{deny: resp, closeConn: req.Acks == 0}
	}
	keep, denied := splitAllowed(req.Topics, func(t kmsg.ProduceRequestTopic) bool { return z.ok(opWrite, rtTopic, t.Topic) })
	req.Topics = keep
	d := answerDenied(len(keep), denied, func(resp *kmsg.ProduceResponse, t kmsg.ProduceRequestTopic) {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		for _, pt := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = pt.Partition, topicDenied, -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	})
	d.closeConn = len(denied) > 0 && req.Acks == 0
	return d
}

func authzFetch(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.FetchRequest)
	if req.ReplicaID >= 0 {
		// A follower fetch: brokers only.
		if z.cluster(opClusterAction) {
			return authzDecision{}
		}
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = clusterDenied
		return authzDecision{deny: resp}
	}
	keep, denied := splitAllowed(req.Topics, func(t kmsg.FetchRequestTopic) bool { return z.ok(opRead, rtTopic, t.Topic) })
	req.Topics = keep
	return answerDenied(len(keep), denied, func(resp *kmsg.FetchResponse, t kmsg.FetchRequestTopic) {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, pt := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.ErrorCode = pt.Partition, topicDenied
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset, rp.PreferredReadReplica = -1, -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	})
}

func authzListOffsets(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.ListOffsetsRequest)
	keep, denied := splitAllowed(req.Topics, func(t kmsg.ListOffsetsRequestTopic) bool { return z.ok(opDescribe, rtTopic, t.Topic) })
	req.Topics = keep
	return answerDenied(len(keep), denied, func(resp *kmsg.ListOffsetsResponse, t kmsg.ListOffsetsRequestTopic) {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, pt := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.Timestamp, rp.Offset, rp.LeaderEpoch = pt.Partition, topicDenied, -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	})
}

func authzOffsetForLeaderEpoch(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.OffsetForLeaderEpochRequest)
	if req.ReplicaID >= 0 {
		if z.cluster(opClusterAction) {
			return authzDecision{}
		}
		resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		for _, t := range req.Topics {
			resp.Topics = append(resp.Topics, leaderEpochDenied(t, clusterDenied))
		}
		return authzDecision{deny: resp}
	}
	keep, denied := splitAllowed(req.Topics, func(t kmsg.OffsetForLeaderEpochRequestTopic) bool { return z.ok(opDescribe, rtTopic, t.Topic) })
	req.Topics = keep
	return answerDenied(len(keep), denied, func(resp *kmsg.OffsetForLeaderEpochResponse, t kmsg.OffsetForLeaderEpochRequestTopic) {
		resp.Topics = append(resp.Topics, leaderEpochDenied(t, topicDenied))
	})
}

func leaderEpochDenied(t kmsg.OffsetForLeaderEpochRequestTopic, code int16) kmsg.OffsetForLeaderEpochResponseTopic {
	rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
	rt.Topic = t.Topic
	for _, pt := range t.Partitions {
		rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
		rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = pt.Partition, code, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

func authzDeleteRecords(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.DeleteRecordsRequest)
	keep, denied := splitAllowed(req.Topics, func(t kmsg.DeleteRecordsRequestTopic) bool { return z.ok(opDelete, rtTopic, t.Topic) })
	req.Topics = keep
	return answerDenied(len(keep), denied, func(resp *kmsg.DeleteRecordsResponse, t kmsg.DeleteRecordsRequestTopic) {
		rt := kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		for _, pt := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.LowWatermark = pt.Partition, topicDenied, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	})
}

func authzDescribeProducers(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.DescribeProducersRequest)
	keep, denied := splitAllowed(req.Topics, func(t kmsg.DescribeProducersRequestTopic) bool { return z.ok(opRead, rtTopic, t.Topic) })
	req.Topics = keep
	return answerDenied(len(keep), denied, func(resp *kmsg.DescribeProducersResponse, t kmsg.DescribeProducersRequestTopic) {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		for _, part := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition, rp.ErrorCode = part, topicDenied
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	})
}

// ---- Metadata ----

// authzMetadata: DESCRIBE per topic (named topics the principal may not
// describe answer TOPIC_AUTHORIZATION_FAILED; in an all-topics request
// they are simply absent); auto-creation needs CREATE on the cluster or
// the topic, else the missing topic answers TOPIC_AUTHORIZATION_FAILED
// (KafkaApis.handleTopicMetadataRequest); authorized_operations report the
// principal's real operations.
func authzMetadata(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.MetadataRequest)
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	var denied []string
	if !all {
		autoCreate := !z.r.s.cfg.DisableAutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
		canCreateAll := autoCreate && z.cluster(opCreate)
		keep := req.Topics[:0:0]
		for _, t := range req.Topics {
			if t.Topic == nil { // by topic id: judged on the answer
				keep = append(keep, t)
				continue
			}
			name := *t.Topic
			switch {
			case !z.ok(opDescribe, rtTopic, name):
				denied = append(denied, name)
			case autoCreate && !canCreateAll && !z.ok(opCreate, rtTopic, name) && !topicExists(z, name):
				denied = append(denied, name)
			default:
				keep = append(keep, t)
			}
		}
		if len(keep) == 0 && req.Version == 0 {
			keep = nil // v0's empty list means "all": the answer is filtered instead
			all = true
		}
		req.Topics = keep
	}
	byID := map[[16]byte]bool{}
	for _, t := range req.Topics {
		if t.Topic == nil {
			byID[t.TopicID] = true
		}
	}
	return authzDecision{patch: func(p kmsg.Response) {
		resp := p.(*kmsg.MetadataResponse)
		out := resp.Topics[:0]
		for _, t := range resp.Topics {
			switch {
			case t.Topic == nil: // an unknown topic id: the handler's error entry
			case z.ok(opDescribe, rtTopic, *t.Topic):
				if req.IncludeTopicAuthorizedOperations && req.Version >= 8 {
					t.AuthorizedOperations = z.ops(rtTopic, *t.Topic)
				}
			case byID[t.TopicID] && !all:
				// Asked for by id; it names a topic the principal may not
				// describe: say so without the name.
				t.ErrorCode, t.Topic, t.Partitions, t.IsInternal, t.AuthorizedOperations = topicDenied, nil, nil, false, noAuthorizedOps
			default:
				continue // not describable: absent from the answer
			}
			out = append(out, t)
		}
		resp.Topics = out
		for _, name := range denied {
			t := kmsg.NewMetadataResponseTopic()
			t.Topic, t.ErrorCode, t.AuthorizedOperations = strPtr(name), topicDenied, noAuthorizedOps
			resp.Topics = append(resp.Topics, t)
		}
		if req.IncludeClusterAuthorizedOperations && req.Version >= 8 && req.Version <= 10 {
			resp.AuthorizedOperations = z.ops(kacl.ResourceCluster, kacl.ClusterName)
		}
	}}
}

func topicExists(z *authzCtx, name string) bool {
	ctx, cancel := context.WithTimeout(z.r.ctx, 10*time.Second)
	defer cancel()
	_, err := z.r.s.store.Topic(ctx, name)
	return err == nil
}

func authzDescribeTopicPartitions(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.DescribeTopicPartitionsRequest)
	keep, denied := splitAllowed(req.Topics, func(t kmsg.DescribeTopicPartitionsRequestTopic) bool { return z.ok(opDescribe, rtTopic, t.Topic) })
	req.Topics = keep
	return authzDecision{empty: len(keep) == 0 && len(denied) > 0, patch: func(p kmsg.Response) {
		resp := p.(*kmsg.DescribeTopicPartitionsResponse)
		out := resp.Topics[:0]
		for _, t := range resp.Topics {
			if t.Topic == nil || !z.ok(opDescribe, rtTopic, *t.Topic) {
				continue
			}
			t.AuthorizedOperations = z.ops(rtTopic, *t.Topic)
			out = append(out, t)
		}
		resp.Topics = out
		for _, d := range denied {
			t := kmsg.NewDescribeTopicPartitionsResponseTopic()
			t.Topic, t.ErrorCode, t.AuthorizedOperations = strPtr(d.Topic), topicDenied, noAuthorizedOps
			resp.Topics = append(resp.Topics, t)
		}
	}}
}

// ---- topic administration ----

func authzCreateTopics(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.CreateTopicsRequest)
	clusterCreate := z.cluster(opCreate)
	keep, denied := splitAllowed(req.Topics, func(t kmsg.CreateTopicsRequestTopic) bool {
		return clusterCreate || z.ok(opCreate, rtTopic, t.Topic)
	})
	req.Topics = keep
	return authzDecision{empty: len(keep) == 0 && len(denied) > 0, patch: func(p kmsg.Response) {
		resp := p.(*kmsg.CreateTopicsResponse)
		for i := range resp.Topics {
			t := &resp.Topics[i]
			// v5+ answers the topic's configs only to who may describe them.
			if req.Version >= 5 && t.ErrorCode == 0 && !z.ok(opDescribeConfigs, rtTopic, t.Topic) {
				t.ConfigErrorCode, t.Configs = topicDenied, nil
			}
		}
		for _, d := range denied {
			t := kmsg.NewCreateTopicsResponseTopic()
			t.Topic, t.ErrorCode = d.Topic, topicDenied
			t.ErrorMessage = strPtr("Authorization failed.")
			t.NumPartitions, t.ReplicationFactor = -1, -1
			resp.Topics = append(resp.Topics, t)
		}
	}}
}

func authzDeleteTopics(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.DeleteTopicsRequest)
	type denial struct {
		name *string
		id   [16]byte
	}
	var denied []denial
	if req.Version < 6 {
		keep := req.TopicNames[:0:0]
		for _, n := range req.TopicNames {
			if z.ok(opDelete, rtTopic, n) {
				keep = append(keep, n)
			} else {
				denied = append(denied, denial{name: strPtr(n)})
			}
		}
		req.TopicNames = keep
	} else {
		keep := req.Topics[:0:0]
		for _, t := range req.Topics {
			name := t.Topic
			if name == nil {
				// By id: authorize the name it resolves to (an unknown id is
				// the handler's UNKNOWN_TOPIC_ID).
				if top, err := z.r.s.store.TopicByID(z.r.ctx, kstore.TopicID(t.TopicID)); err == nil {
					name = &top.Name
				} else {
					keep = append(keep, t)
					continue
				}
			}
			if z.ok(opDelete, rtTopic, *name) {
				keep = append(keep, t)
			} else {
				denied = append(denied, denial{name: t.Topic, id: t.TopicID})
			}
		}
		req.Topics = keep
	}
	if len(denied) == 0 {
		return authzDecision{}
	}
	return authzDecision{empty: len(req.Topics) == 0 && len(req.TopicNames) == 0, patch: func(p kmsg.Response) {
		resp := p.(*kmsg.DeleteTopicsResponse)
		for _, d := range denied {
			t := kmsg.NewDeleteTopicsResponseTopic()
			t.Topic, t.TopicID, t.ErrorCode = d.name, d.id, topicDenied
			resp.Topics = append(resp.Topics, t)
		}
	}}
}

func authzCreatePartitions(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.CreatePartitionsRequest)
	keep, denied := splitAllowed(req.Topics, func(t kmsg.CreatePartitionsRequestTopic) bool { return z.ok(opAlter, rtTopic, t.Topic) })
	req.Topics = keep
	return answerDenied(len(keep), denied, func(resp *kmsg.CreatePartitionsResponse, d kmsg.CreatePartitionsRequestTopic) {
		t := kmsg.NewCreatePartitionsResponseTopic()
		t.Topic, t.ErrorCode = d.Topic, topicDenied
		resp.Topics = append(resp.Topics, t)
	})
}

// configResource is (topic|cluster, name) of a config resource; ok is
// false for types Nereus does not map (their handler answers them).
func configResource(rt kmsg.ConfigResourceType) (kacl.ResourceType, bool) {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		return rtTopic, true
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		return kacl.ResourceCluster, true
	}
	return 0, false
}

// configDenial is the error denying op on a config resource, 0 when it is
// allowed (types Nereus does not map are their handler's to answer).
func configDenial(z *authzCtx, op kacl.Operation, rt kmsg.ConfigResourceType, name string) int16 {
	art, ok := configResource(rt)
	switch {
	case !ok:
		return 0
	case art == rtTopic:
		if z.ok(op, rtTopic, name) {
			return 0
		}
		return topicDenied
	default:
		if z.cluster(op) {
			return 0
		}
		return clusterDenied
	}
}

func authzDescribeConfigs(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.DescribeConfigsRequest)
	keep, denied := splitDenials(req.Resources, func(rs kmsg.DescribeConfigsRequestResource) int16 {
		return configDenial(z, opDescribeConfigs, rs.ResourceType, rs.ResourceName)
	})
	req.Resources = keep
	return answerDenied(len(keep), denied, func(resp *kmsg.DescribeConfigsResponse, d coded[kmsg.DescribeConfigsRequestResource]) {
		r := kmsg.NewDescribeConfigsResponseResource()
		r.ResourceType, r.ResourceName, r.ErrorCode = d.item.ResourceType, d.item.ResourceName, d.code
		r.ErrorMessage = strPtr(kerr.ErrorForCode(d.code).Error())
		resp.Resources = append(resp.Resources, r)
	})
}

func authzAlterConfigs(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.AlterConfigsRequest)
	keep, denied := splitDenials(req.Resources, func(rs kmsg.AlterConfigsRequestResource) int16 {
		return configDenial(z, opAlterConfigs, rs.ResourceType, rs.ResourceName)
	})
	req.Resources = keep
	return answerDenied(len(keep), denied, func(resp *kmsg.AlterConfigsResponse, d coded[kmsg.AlterConfigsRequestResource]) {
		r := kmsg.NewAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName, r.ErrorCode = d.item.ResourceType, d.item.ResourceName, d.code
		r.ErrorMessage = strPtr(kerr.ErrorForCode(d.code).Error())
		resp.Resources = append(resp.Resources, r)
	})
}

func authzIncrementalAlterConfigs(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.IncrementalAlterConfigsRequest)
	keep, denied := splitDenials(req.Resources, func(rs kmsg.IncrementalAlterConfigsRequestResource) int16 {
		return configDenial(z, opAlterConfigs, rs.ResourceType, rs.ResourceName)
	})
	req.Resources = keep
	return answerDenied(len(keep), denied, func(resp *kmsg.IncrementalAlterConfigsResponse, d coded[kmsg.IncrementalAlterConfigsRequestResource]) {
		r := kmsg.NewIncrementalAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName, r.ErrorCode = d.item.ResourceType, d.item.ResourceName, d.code
		r.ErrorMessage = strPtr(kerr.ErrorForCode(d.code).Error())
		resp.Resources = append(resp.Resources, r)
	})
}

func authzAlterClientQuotas(z *authzCtx) authzDecision {
	if z.cluster(opAlterConfigs) {
		return authzDecision{}
	}
	req := z.r.kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		re.ErrorCode, re.ErrorMessage = clusterDenied, strPtr(kerr.ClusterAuthorizationFailed.Message)
		for _, ent := range e.Entity {
			x := kmsg.NewAlterClientQuotasResponseEntryEntity()
			x.Type, x.Name = ent.Type, ent.Name
			re.Entity = append(re.Entity, x)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return authzDecision{deny: resp}
}

func authzAlterUserSCRAM(z *authzCtx) authzDecision {
	if z.cluster(opAlter) {
		return authzDecision{}
	}
	req := z.r.kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	seen := map[string]bool{}
	add := func(user string) {
		if seen[user] {
			return
		}
		seen[user] = true
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User, res.ErrorCode, res.ErrorMessage = user, clusterDenied, strPtr(kerr.ClusterAuthorizationFailed.Message)
		resp.Results = append(resp.Results, res)
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return authzDecision{deny: resp}
}

func authzDescribeCluster(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.DescribeClusterRequest)
	return authzDecision{patch: func(p kmsg.Response) {
		resp := p.(*kmsg.DescribeClusterResponse)
		if req.IncludeClusterAuthorizedOperations {
			resp.ClusterAuthorizedOperations = z.ops(kacl.ResourceCluster, kacl.ClusterName)
		} else {
			resp.ClusterAuthorizedOperations = noAuthorizedOps
		}
	}}
}

// ---- groups ----

func authzOffsetCommit(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.OffsetCommitRequest)
	groupOK := z.ok(opRead, rtGroup, req.Group)
	keep, denied := splitDenials(req.Topics, func(t kmsg.OffsetCommitRequestTopic) int16 {
		switch {
		case !groupOK:
			return groupDenied
		case !z.ok(opRead, rtTopic, t.Topic):
			return topicDenied
		}
		return 0
	})
	req.Topics = keep
	return answerDenied(len(keep), denied, func(resp *kmsg.OffsetCommitResponse, d coded[kmsg.OffsetCommitRequestTopic]) {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = d.item.Topic, d.item.TopicID
		for _, pt := range d.item.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = pt.Partition, d.code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	})
}

func authzOffsetFetch(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.OffsetFetchRequest)
	if req.Version >= 8 {
		return authzOffsetFetchGroups(z, req)
	}
	if !z.ok(opDescribe, rtGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = groupDenied
		for _, t := range req.Topics { // v0-1 carry the error per partition
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, part := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = part, -1, -1, groupDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return authzDecision{deny: resp}
	}
	all := req.Topics == nil
	var denied []kmsg.OffsetFetchRequestTopic
	if !all {
		req.Topics, denied = splitAllowed(req.Topics, func(t kmsg.OffsetFetchRequestTopic) bool { return z.ok(opDescribe, rtTopic, t.Topic) })
	}
	return authzDecision{patch: func(p kmsg.Response) {
		resp := p.(*kmsg.OffsetFetchResponse)
		if all {
			out := resp.Topics[:0]
			for _, t := range resp.Topics {
				if z.ok(opDescribe, rtTopic, t.Topic) {
					out = append(out, t)
				}
			}
			resp.Topics = out
		}
		for _, t := range denied {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, part := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = part, -1, -1, topicDenied
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}}
}

func authzOffsetFetchGroups(z *authzCtx, req *kmsg.OffsetFetchRequest) authzDecision {
	var deniedGroups []string
	deniedTopics := map[string][]kmsg.OffsetFetchRequestGroupTopic{}
	allTopics := map[string]bool{}
	keep := req.Groups[:0:0]
	for _, g := range req.Groups {
		if !z.ok(opDescribe, rtGroup, g.Group) {
			deniedGroups = append(deniedGroups, g.Group)
			continue
		}
		if g.Topics == nil {
			allTopics[g.Group] = true
		} else {
			kt := g.Topics[:0:0]
			for _, t := range g.Topics {
				if z.ok(opDescribe, rtTopic, t.Topic) {
					kt = append(kt, t)
				} else {
					deniedTopics[g.Group] = append(deniedTopics[g.Group], t)
				}
			}
			g.Topics = kt
		}
		keep = append(keep, g)
	}
	req.Groups = keep
	return authzDecision{empty: len(keep) == 0 && len(deniedGroups) > 0, patch: func(p kmsg.Response) {
		resp := p.(*kmsg.OffsetFetchResponse)
		for i := range resp.Groups {
			g := &resp.Groups[i]
			if allTopics[g.Group] {
				out := g.Topics[:0]
				for _, t := range g.Topics {
					if z.ok(opDescribe, rtTopic, t.Topic) {
						out = append(out, t)
					}
				}
				g.Topics = out
			}
			for _, t := range deniedTopics[g.Group] {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = t.Topic
				for _, part := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = part, -1, -1, topicDenied
					rt.Partitions = append(rt.Partitions, rp)
				}
				g.Topics = append(g.Topics, rt)
			}
		}
		for _, name := range deniedGroups {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = name, groupDenied
			resp.Groups = append(resp.Groups, g)
		}
	}}
}

func authzFindCoordinator(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.FindCoordinatorRequest)
	rt, code := rtGroup, groupDenied
	if req.CoordinatorType == 1 {
		rt, code = rtTxn, txnDenied
	}
	if req.Version < 4 {
		if req.CoordinatorType > 1 || z.ok(opDescribe, rt, req.CoordinatorKey) {
			return authzDecision{}
		}
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
		resp.ErrorMessage = strPtr(kerr.ErrorForCode(code).Error())
		return authzDecision{deny: resp}
	}
	if req.CoordinatorType > 1 {
		return authzDecision{}
	}
	keep, denied := splitAllowed(req.CoordinatorKeys, func(k string) bool { return z.ok(opDescribe, rt, k) })
	req.CoordinatorKeys = keep
	return answerDenied(len(keep), denied, func(resp *kmsg.FindCoordinatorResponse, k string) {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Port, c.ErrorCode = k, -1, -1, code
		c.ErrorMessage = strPtr(kerr.ErrorForCode(code).Error())
		resp.Coordinators = append(resp.Coordinators, c)
	})
}

func authzDescribeGroups(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.DescribeGroupsRequest)
	keep, denied := splitAllowed(req.Groups, func(g string) bool { return z.ok(opDescribe, rtGroup, g) })
	req.Groups = keep
	return authzDecision{empty: len(keep) == 0 && len(denied) > 0, patch: func(p kmsg.Response) {
		resp := p.(*kmsg.DescribeGroupsResponse)
		for i := range resp.Groups {
			g := &resp.Groups[i]
			if req.Version >= 3 && req.IncludeAuthorizedOperations {
				g.AuthorizedOperations = z.ops(rtGroup, g.Group)
			}
		}
		for _, name := range denied {
			g := kmsg.NewDescribeGroupsResponseGroup()
			g.Group, g.ErrorCode, g.AuthorizedOperations = name, groupDenied, noAuthorizedOps
			resp.Groups = append(resp.Groups, g)
		}
	}}
}

func authzListGroups(z *authzCtx) authzDecision {
	if z.cluster(opDescribe) {
		return authzDecision{}
	}
	return authzDecision{patch: func(p kmsg.Response) {
		resp := p.(*kmsg.ListGroupsResponse)
		out := resp.Groups[:0]
		for _, g := range resp.Groups {
			if z.ok(opDescribe, rtGroup, g.Group) {
				out = append(out, g)
			}
		}
		resp.Groups = out
	}}
}

func authzDeleteGroups(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.DeleteGroupsRequest)
	keep, denied := splitAllowed(req.Groups, func(g string) bool { return z.ok(opDelete, rtGroup, g) })
	req.Groups = keep
	return answerDenied(len(keep), denied, func(resp *kmsg.DeleteGroupsResponse, n string) {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group, g.ErrorCode = n, groupDenied
		resp.Groups = append(resp.Groups, g)
	})
}

func authzOffsetDelete(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.OffsetDeleteRequest)
	if !z.ok(opDelete, rtGroup, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = groupDenied
		return authzDecision{deny: resp}
	}
	keep, denied := splitAllowed(req.Topics, func(t kmsg.OffsetDeleteRequestTopic) bool { return z.ok(opRead, rtTopic, t.Topic) })
	req.Topics = keep
	return answerDenied(len(keep), denied, func(resp *kmsg.OffsetDeleteResponse, t kmsg.OffsetDeleteRequestTopic) {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, pt := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = pt.Partition, topicDenied
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	})
}

// ---- transactions ----

func authzInitProducerID(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		if z.ok(opWrite, rtTxn, *req.TransactionalID) {
			return authzDecision{}
		}
		resp.ErrorCode = txnDenied
		return authzDecision{deny: resp}
	}
	// An idempotent producer: IDEMPOTENT_WRITE on the cluster, or (Kafka
	// 2.8+) WRITE on any topic.
	if z.cluster(opIdempotentWrite) || z.a.AuthorizeAny(z.principal, z.host, opWrite, rtTopic) {
		return authzDecision{}
	}
	resp.ErrorCode = clusterDenied
	return authzDecision{deny: resp}
}

func authzAddPartitionsToTxn(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.AddPartitionsToTxnRequest)
	if req.Version >= 4 {
		// Batched (broker-to-coordinator verification) requests need
		// CLUSTER_ACTION; a v4+ client request carries one transaction.
		if z.cluster(opClusterAction) {
			return authzDecision{}
		}
		for _, tx := range req.Transactions {
			if !z.ok(opWrite, rtTxn, tx.TransactionalID) {
				resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
				resp.ErrorCode = clusterDenied
				return authzDecision{deny: resp}
			}
			for _, t := range tx.Topics {
				if !z.ok(opWrite, rtTopic, t.Topic) {
					resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
					resp.ErrorCode = clusterDenied
					return authzDecision{deny: resp}
				}
			}
		}
		return authzDecision{}
	}
	txnOK := z.ok(opWrite, rtTxn, req.TransactionalID)
	anyDenied := false
	codes := map[string]int16{}
	for _, t := range req.Topics {
		switch {
		case !txnOK:
			codes[t.Topic] = txnDenied
		case !z.ok(opWrite, rtTopic, t.Topic):
			codes[t.Topic], anyDenied = topicDenied, true
		}
	}
	if txnOK && !anyDenied {
		return authzDecision{}
	}
	// Kafka answers the whole request: denied partitions with their error,
	// the others OPERATION_NOT_ATTEMPTED.
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = t.Topic
		code, ok := codes[t.Topic]
		if !ok {
			code = kerr.OperationNotAttempted.Code
		}
		for _, part := range t.Partitions {
			rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			rp.Partition, rp.ErrorCode = part, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return authzDecision{deny: resp}
}

func authzAddOffsetsToTxn(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !z.ok(opWrite, rtTxn, req.TransactionalID):
		resp.ErrorCode = txnDenied
	case !z.ok(opRead, rtGroup, req.Group):
		resp.ErrorCode = groupDenied
	default:
		return authzDecision{}
	}
	return authzDecision{deny: resp}
}

func authzTxnOffsetCommit(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.TxnOffsetCommitRequest)
	whole := int16(0)
	switch {
	case !z.ok(opWrite, rtTxn, req.TransactionalID):
		whole = txnDenied
	case !z.ok(opRead, rtGroup, req.Group):
		whole = groupDenied
	}
	keep, denied := splitDenials(req.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) int16 {
		if whole == 0 && !z.ok(opRead, rtTopic, t.Topic) {
			return topicDenied
		}
		return whole
	})
	req.Topics = keep
	return answerDenied(len(keep), denied, func(resp *kmsg.TxnOffsetCommitResponse, d coded[kmsg.TxnOffsetCommitRequestTopic]) {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic, rt.TopicID = d.item.Topic, d.item.TopicID
		for _, pt := range d.item.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = pt.Partition, d.code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	})
}

func authzDescribeTransactions(z *authzCtx) authzDecision {
	req := z.r.kreq.(*kmsg.DescribeTransactionsRequest)
	keep, denied := splitAllowed(req.TransactionalIDs, func(id string) bool { return z.ok(opDescribe, rtTxn, id) })
	req.TransactionalIDs = keep
	return answerDenied(len(keep), denied, func(resp *kmsg.DescribeTransactionsResponse, id string) {
		s := kmsg.NewDescribeTransactionsResponseTransactionState()
		s.TransactionalID, s.ErrorCode, s.ProducerID, s.ProducerEpoch = id, txnDenied, -1, -1
		resp.TransactionStates = append(resp.TransactionStates, s)
	})
}

func authzListTransactions(z *authzCtx) authzDecision {
	return authzDecision{patch: func(p kmsg.Response) {
		resp := p.(*kmsg.ListTransactionsResponse)
		out := resp.TransactionStates[:0]
		for _, s := range resp.TransactionStates {
			if z.ok(opDescribe, rtTxn, s.TransactionalID) {
				out = append(out, s)
			}
		}
		resp.TransactionStates = out
	}}
}
