package kafka

// DescribeConfigs: v0-4
//
// Behavior:
//   - Topic resources return every topic config the broker knows (package
//     kstore's table), or the named subset (unknown names are skipped, as
//     Kafka does), with source DYNAMIC_TOPIC_CONFIG when set on the topic
//     and DEFAULT_CONFIG otherwise. Configs that are accepted for
//     compatibility but have no effect in Nereus say so in their
//     documentation (v3+).
//   - Broker resources (this node id, or "" for the cluster default) return a
//     few read-only broker settings. Other resource types get INVALID_REQUEST.
//   - Synonyms (v1+) list the topic value and the default when asked.
//
// Version notes:
//   - v1: include_synonyms, config source. v2: same.
//   - v3: config type and documentation. v4: flexible.

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kstore"
)

func init() { regKey(32, 0, 4, handleDescribeConfigs) }

func handleDescribeConfigs(r *request) (kmsg.Response, func() kmsg.Response, error) {
	req := r.kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		out := kmsg.NewDescribeConfigsResponseResource()
		out.ResourceType, out.ResourceName = rr.ResourceType, rr.ResourceName
		want := func(name string) bool {
			if rr.ConfigNames == nil {
				return true
			}
			for _, n := range rr.ConfigNames {
				if n == name {
					return true
				}
			}
			return false
		}
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t, err := r.s.store.Topic(r.ctx, rr.ResourceName)
			if err != nil {
				out.ErrorCode, out.ErrorMessage = errorCode(err), errorMessage(err)
				break
			}
			for _, d := range kstore.ConfigDefs() {
				if !want(d.Name) {
					continue
				}
				v, explicit := t.Configs.Get(d.Name)
				out.Configs = append(out.Configs, describeConfig(req, d, v, explicit))
			}
		case kmsg.ConfigResourceTypeBroker:
			if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(r.s.cfg.NodeID)) {
				out.ErrorCode = kerr.InvalidRequest.Code
				msg := "nereus: unknown broker " + rr.ResourceName
				out.ErrorMessage = &msg
				break
			}
			for _, kv := range r.s.brokerConfigs() {
				if !want(kv[0]) {
					continue
				}
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				v := kv[1]
				c.Name, c.Value, c.ReadOnly = kv[0], &v, true
				c.Source = kmsg.ConfigSourceStaticBrokerConfig
				c.ConfigType = kmsg.ConfigTypeString
				out.Configs = append(out.Configs, c)
			}
		default:
			out.ErrorCode = kerr.InvalidRequest.Code
			msg := "nereus: only topic and broker configs can be described"
			out.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, out)
	}
	return resp, nil, nil
}

func describeConfig(req *kmsg.DescribeConfigsRequest, d kstore.ConfigDef, v string, explicit bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	val := v
	c.Name, c.Value, c.ReadOnly = d.Name, &val, d.ReadOnly
	c.IsDefault = !explicit
	c.Source = kmsg.ConfigSourceDefaultConfig
	if explicit {
		c.Source = kmsg.ConfigSourceDynamicTopicConfig
	}
	c.ConfigType = kmsg.ConfigType(d.Type)
	if req.IncludeDocumentation {
		doc := d.Doc
		if !d.Enforced {
			doc = "Accepted for compatibility; no effect in Nereus."
		}
		c.Documentation = &doc
	}
	if req.IncludeSynonyms {
		if explicit {
			s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			sv := v
			s.Name, s.Value, s.Source = d.Name, &sv, kmsg.ConfigSourceDynamicTopicConfig
			c.ConfigSynonyms = append(c.ConfigSynonyms, s)
		}
		s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		dv := d.Default
		s.Name, s.Value, s.Source = d.Name, &dv, kmsg.ConfigSourceDefaultConfig
		c.ConfigSynonyms = append(c.ConfigSynonyms, s)
	}
	return c
}

func (s *Server) brokerConfigs() [][2]string {
	auto := "true"
	if s.cfg.DisableAutoCreateTopics {
		auto = "false"
	}
	return [][2]string{
		{"auto.create.topics.enable", auto},
		{"broker.id", strconv.Itoa(int(s.cfg.NodeID))},
		{"node.id", strconv.Itoa(int(s.cfg.NodeID))},
		{"num.partitions", strconv.Itoa(int(s.cfg.DefaultPartitions))},
		{"message.max.bytes", "1048588"},
	}
}
