package cluster

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"sort"
	"strconv"
	"time"
)

// Key layout in the metadata store (all under "cluster/"):
//
//	cluster/brokers/<nodeID>          ephemeral Broker record, bound to the node's session
//	cluster/kafka-broker-ids/<id>     persistent claim: Kafka broker id <id> belongs to a node ID
//	cluster/kafka-broker-id-seq       persistent counter for the next candidate id
const (
	keyBrokers       = "cluster/brokers/"
	keyKafkaIDs      = "cluster/kafka-broker-ids/"
	keyKafkaIDSeq    = "cluster/kafka-broker-id-seq"
	brokerRecordV    = 1
	recordFormat     = 1
	recordHeaderSize = 5
)

// Protocols named in Endpoint.Protocol.
const (
	ProtocolKafka  = "kafka"
	ProtocolPulsar = "pulsar"
	ProtocolHTTP   = "http"
)

// BrokerState is a registered broker's lifecycle state.
type BrokerState string

const (
	// StateActive brokers take part in ownership assignment.
	StateActive BrokerState = "active"
	// StateDraining brokers are leaving: they still serve (and hand their
	// streams over), but no stream or coordinator is assigned to them.
	StateDraining BrokerState = "draining"
)

// Endpoint is one advertised address of a broker. A broker may advertise
// several endpoints per protocol, told apart by Listener (Kafka's listener
// name, e.g. "PLAINTEXT", "SASL_SSL"); clients are answered with the
// endpoint of the listener they connected through.
type Endpoint struct {
	Protocol string `json:"protocol"`
	Listener string `json:"listener"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	TLS      bool   `json:"tls,omitempty"`
}

// Addr is host:port.
func (e Endpoint) Addr() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

// Broker is one node's registry record: who it is, where clients reach it,
// and whether it takes part in ownership.
type Broker struct {
	V      int    `json:"v"`
	NodeID string `json:"nodeId"`
	// KafkaID is the node's stable int32 Kafka broker id (see
	// ClaimKafkaBrokerID).
	KafkaID int32  `json:"kafkaBrokerId"`
	Rack    string `json:"rack,omitempty"`
	Version string `json:"version,omitempty"`
	// Weight scales the node's share of ownership (rendezvous weight;
	// default 1).
	Weight    uint32      `json:"weight"`
	State     BrokerState `json:"state"`
	Endpoints []Endpoint  `json:"endpoints"`
	// RegisteredMs is when the node's current metadata session registered
	// this record; SessionTTLMs is that session's TTL.
	RegisteredMs int64 `json:"registeredMs"`
	SessionTTLMs int64 `json:"sessionTtlMs"`
}

// Endpoint returns the broker's endpoint for protocol and listener (empty
// listener: the first endpoint of the protocol).
func (b Broker) Endpoint(protocol, listener string) (Endpoint, bool) {
	for _, e := range b.Endpoints {
		if e.Protocol == protocol && (listener == "" || e.Listener == listener) {
			return e, true
		}
	}
	return Endpoint{}, false
}

// Registered is when the broker's current session registered.
func (b Broker) Registered() time.Time { return time.UnixMilli(b.RegisteredMs) }

// Active reports whether the broker takes part in ownership.
func (b Broker) Active() bool { return b.State == StateActive }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorruptRecord marks a cluster metadata record that fails its
// checksum or cannot be decoded; it is never used as state.
var ErrCorruptRecord = errors.New("nereus/cluster: corrupt record")

// encodeRecord is the cluster's record envelope:
// [u8 format=1][u32 big-endian CRC32C(body)][body JSON].
func encodeRecord(v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := make([]byte, recordHeaderSize, recordHeaderSize+len(body))
	out[0] = recordFormat
	binary.BigEndian.PutUint32(out[1:], crc32.Checksum(body, castagnoli))
	return append(out, body...), nil
}

func decodeRecord(b []byte, v any) error {
	if len(b) < recordHeaderSize || b[0] != recordFormat {
		return fmt.Errorf("%w: unknown format", ErrCorruptRecord)
	}
	if crc32.Checksum(b[recordHeaderSize:], castagnoli) != binary.BigEndian.Uint32(b[1:]) {
		return fmt.Errorf("%w: checksum mismatch", ErrCorruptRecord)
	}
	if err := json.Unmarshal(b[recordHeaderSize:], v); err != nil {
		return fmt.Errorf("%w: %v", ErrCorruptRecord, err)
	}
	return nil
}

func decodeBroker(b []byte) (Broker, error) {
	var br Broker
	if err := decodeRecord(b, &br); err != nil {
		return Broker{}, err
	}
	if br.V != brokerRecordV {
		return Broker{}, fmt.Errorf("%w: broker record version %d", ErrCorruptRecord, br.V)
	}
	if br.NodeID == "" {
		return Broker{}, fmt.Errorf("%w: broker record without node id", ErrCorruptRecord)
	}
	if br.Weight == 0 {
		br.Weight = 1
	}
	return br, nil
}

// sortBrokers orders brokers by Kafka broker id, then node id.
func sortBrokers(bs []Broker) {
	sort.Slice(bs, func(i, j int) bool {
		if bs[i].KafkaID != bs[j].KafkaID {
			return bs[i].KafkaID < bs[j].KafkaID
		}
		return bs[i].NodeID < bs[j].NodeID
	})
}
