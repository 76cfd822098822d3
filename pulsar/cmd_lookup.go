// LOOKUP, PARTITIONED_METADATA, GET_TOPICS_OF_NAMESPACE.
//
// Behaviour:
//   - LOOKUP answers Connect (authoritative) when this broker serves the
//     topic — the owner of the topic's stream in the cluster view, see
//     ownership.go — and otherwise Redirect to the owner's URLs with
//     authoritative=true, so the client's next lookup goes there. An
//     authoritative lookup that reaches a broker whose view names another
//     owner waits up to a second for its view to change, then redirects
//     again (clients follow up to 20 redirects). No active broker:
//     Failed/ServiceNotReady.
//   - PARTITIONED_METADATA answers the partition count of a partitioned
//     topic, 0 otherwise (including for unknown topics, which producers and
//     consumers then auto-create as non-partitioned, like Pulsar's
//     allowAutoTopicCreationType=non-partitioned).
//   - GET_TOPICS_OF_NAMESPACE lists the namespace's topics (partitions by
//     their partition names), filtered by topics_pattern when given.
//
// Differences from the real broker:
//   - Ownership is per topic (each partition is a topic), not per
//     namespace bundle. advertised_listener_name picks
//     the listener group (Pulsar's advertisedListeners); without it the
//     group of the listener the client is connected through answers, with
//     both its pulsar:// and pulsar+ssl:// URLs.
//   - An invalid topic name answers Failed/InvalidTopicName.

package pulsar

import (
	"context"
	"regexp"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
)

func init() {
	register(pb.BaseCommand_LOOKUP, handleLookup)
	register(pb.BaseCommand_PARTITIONED_METADATA, handlePartitionedMetadata)
	register(pb.BaseCommand_GET_TOPICS_OF_NAMESPACE, handleGetTopicsOfNamespace)
}

func handleLookup(c *conn, f wire.Frame) error {
	if !c.s.cfg.Auth.Authorization {
		return lookupTopic(c, f)
	}
	// Authorization reads the namespace's permissions: off the reader.
	l := f.Cmd.GetLookupTopic()
	c.async(func(ctx context.Context) {
		if name, err := managedledger.ParseTopicName(l.GetTopic()); err == nil {
			if err := c.authorize(ctx, name, actionLookup); err != nil {
				code, msg := toServerError(err)
				c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: &pb.CommandLookupTopicResponse{
					RequestId: proto.Uint64(l.GetRequestId()), Response: pb.CommandLookupTopicResponse_Failed.Enum(),
					Error: code.Enum(), Message: proto.String(msg)}})
				return
			}
		}
		_ = lookupTopic(c, f)
	})
	return nil
}

func lookupTopic(c *conn, f wire.Frame) error {
	l := f.Cmd.GetLookupTopic()
	reqID := l.GetRequestId()
	resp := &pb.CommandLookupTopicResponse{RequestId: proto.Uint64(reqID)}
	name, err := managedledger.ParseTopicName(l.GetTopic())
	if err != nil {
		resp.Response = pb.CommandLookupTopicResponse_Failed.Enum()
		resp.Error = pb.ServerError_InvalidTopicName.Enum()
		resp.Message = proto.String(err.Error())
		c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: resp})
		return nil
	}
	if _, self, _ := c.s.topicOwner(name); !self {
		authoritative, listenerName := l.GetAuthoritative(), l.GetAdvertisedListenerName()
		c.async(func(ctx context.Context) {
			// A peer whose connection just closed may be the owner:
			// answer after the verdict, naming the new owner.
			c.s.cluster.Settle(ctx)
			if authoritative {
				c.s.awaitOwnerChange(ctx, time.Second)
			}
			owner, self, ok := c.s.topicOwner(name)
			switch {
			case self:
				c.s.answerLookupHere(c, resp, listenerName)
				return
			case !ok:
				resp.Response = pb.CommandLookupTopicResponse_Failed.Enum()
				resp.Error = pb.ServerError_ServiceNotReady.Enum()
				resp.Message = proto.String("no active broker serves topics")
			default:
				if listenerName == "" && c.ln != nil {
					listenerName = c.ln.Spec().Name
				}
				plain, tls := ownerURLs(owner, listenerName)
				resp.Response = pb.CommandLookupTopicResponse_Redirect.Enum()
				if plain != "" {
					resp.BrokerServiceUrl = proto.String(plain)
				}
				if tls != "" {
					resp.BrokerServiceUrlTls = proto.String(tls)
				}
				resp.Authoritative = proto.Bool(true)
			}
			c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: resp})
		})
		return nil
	}
	c.s.answerLookupHere(c, resp, l.GetAdvertisedListenerName())
	return nil
}

// answerLookupHere answers Connect for a topic this broker serves, with
// the URLs of the requested listener group (or the connection's).
func (s *Server) answerLookupHere(c *conn, resp *pb.CommandLookupTopicResponse, listenerName string) {
	plain, tls, ok := s.brokerURLs(c.lookupListener(listenerName), c.nc.LocalAddr().String())
	if !ok {
		// Pulsar's words for a listener name the broker does not have.
		resp.Response = pb.CommandLookupTopicResponse_Failed.Enum()
		resp.Error = pb.ServerError_MetadataError.Enum()
		resp.Message = proto.String("the broker do not have " + listenerName + " listener")
	} else {
		resp.Response = pb.CommandLookupTopicResponse_Connect.Enum()
		if plain != "" {
			resp.BrokerServiceUrl = proto.String(plain)
		}
		if tls != "" {
			resp.BrokerServiceUrlTls = proto.String(tls)
		}
		resp.Authoritative = proto.Bool(true)
	}
	c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: resp})
}

// lookupListener is the listener group a LOOKUP answers for: the one the
// client names, else the one its connection arrived on.
func (c *conn) lookupListener(requested string) string {
	if requested != "" {
		return requested
	}
	if len(c.s.cfg.Endpoints) == 0 {
		return ""
	}
	return c.ln.Spec().Name
}

func handlePartitionedMetadata(c *conn, f wire.Frame) error {
	m := f.Cmd.GetPartitionMetadata()
	reqID := m.GetRequestId()
	topicName := m.GetTopic()
	c.async(func(ctx context.Context) {
		resp := &pb.CommandPartitionedTopicMetadataResponse{RequestId: proto.Uint64(reqID)}
		var n int
		name, err := managedledger.ParseTopicName(topicName)
		if err == nil {
			err = c.authorize(ctx, name, actionLookup)
		}
		if err == nil {
			n, err = partitionCount(ctx, c.s, topicName)
		}
		if err != nil {
			code, msg := toServerError(err)
			resp.Response = pb.CommandPartitionedTopicMetadataResponse_Failed.Enum()
			resp.Error = code.Enum()
			resp.Message = proto.String(msg)
		} else {
			resp.Response = pb.CommandPartitionedTopicMetadataResponse_Success.Enum()
			resp.Partitions = proto.Uint32(uint32(n))
		}
		c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_PARTITIONED_METADATA_RESPONSE.Enum(), PartitionMetadataResponse: resp})
	})
	return nil
}

func partitionCount(ctx context.Context, s *Server, topic string) (int, error) {
	name, err := managedledger.ParseTopicName(topic)
	if err != nil {
		return 0, err
	}
	if name.PartitionIndex() >= 0 {
		return 0, nil
	}
	return s.ml.PartitionCount(ctx, name)
}

func handleGetTopicsOfNamespace(c *conn, f wire.Frame) error {
	g := f.Cmd.GetGetTopicsOfNamespace()
	reqID, ns, mode, pattern := g.GetRequestId(), g.GetNamespace(), g.GetMode(), g.GetTopicsPattern()
	c.async(func(ctx context.Context) {
		if c.s.cfg.Auth.Authorization {
			c.authMu.Lock()
			role := c.id.role
			c.authMu.Unlock()
			if ok, err := c.s.allowedNamespace(ctx, role, ns); err != nil || !ok {
				c.sendError(reqID, pb.ServerError_AuthorizationError, "Client is not authorized to list the topics of "+ns)
				return
			}
		}
		var domains []string
		switch mode {
		case pb.CommandGetTopicsOfNamespace_PERSISTENT:
			domains = []string{"persistent"}
		case pb.CommandGetTopicsOfNamespace_NON_PERSISTENT:
			domains = []string{"non-persistent"}
		default:
			domains = []string{"persistent", "non-persistent"}
		}
		var topics []string
		for _, d := range domains {
			ts, err := c.s.ml.ListTopics(ctx, d, ns)
			if err != nil {
				c.sendErr(reqID, err)
				return
			}
			topics = append(topics, ts...)
		}
		filtered := false
		if pattern != "" {
			// Clients send the pattern over the full name; strip the domain
			// like Pulsar's TopicList.filterTopics.
			if re, err := regexp.Compile(pattern); err == nil {
				filtered = true
				out := topics[:0]
				for _, t := range topics {
					if re.MatchString(t) || re.MatchString(strings.SplitN(t, "://", 2)[1]) {
						out = append(out, t)
					}
				}
				topics = out
			}
		}
		c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE.Enum(),
			GetTopicsOfNamespaceResponse: &pb.CommandGetTopicsOfNamespaceResponse{
				RequestId: proto.Uint64(reqID), Topics: topics, Filtered: proto.Bool(filtered), Changed: proto.Bool(true)}})
	})
	return nil
}
