package managedledger

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Default tenant and namespace for short topic names, as in Pulsar.
const (
	DefaultTenant    = "public"
	DefaultNamespace = "default"
	partitionSuffix  = "-partition-"
)

// TopicName is a parsed, fully qualified Pulsar topic name.
type TopicName struct {
	// Domain is "persistent" or "non-persistent" (non-persistent topics are
	// stored like persistent ones).
	Domain    string
	Tenant    string
	Namespace string
	// Local is the topic's local name, including any "-partition-N".
	Local string
}

// ParseTopicName accepts "local", "tenant/namespace/local" and
// "persistent://tenant/namespace/local" (or non-persistent://).
func ParseTopicName(s string) (TopicName, error) {
	t := TopicName{Domain: "persistent"}
	rest := s
	if i := strings.Index(s, "://"); i >= 0 {
		t.Domain, rest = s[:i], s[i+3:]
		if t.Domain != "persistent" && t.Domain != "non-persistent" {
			return TopicName{}, fmt.Errorf("%w: topic %q: unknown domain %q", ErrInvalidName, s, t.Domain)
		}
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) != 3 {
			return TopicName{}, fmt.Errorf("%w: topic %q: want domain://tenant/namespace/topic", ErrInvalidName, s)
		}
		t.Tenant, t.Namespace, t.Local = parts[0], parts[1], parts[2]
	} else {
		parts := strings.Split(rest, "/")
		switch len(parts) {
		case 1:
			t.Tenant, t.Namespace, t.Local = DefaultTenant, DefaultNamespace, parts[0]
		case 3:
			t.Tenant, t.Namespace, t.Local = parts[0], parts[1], parts[2]
		default:
			return TopicName{}, fmt.Errorf("%w: topic %q: want topic or tenant/namespace/topic", ErrInvalidName, s)
		}
	}
	if err := checkName(t.Tenant); err != nil {
		return TopicName{}, fmt.Errorf("%w: topic %q: tenant: %v", ErrInvalidName, s, err)
	}
	if err := checkName(t.Namespace); err != nil {
		return TopicName{}, fmt.Errorf("%w: topic %q: namespace: %v", ErrInvalidName, s, err)
	}
	if t.Local == "" || strings.ContainsAny(t.Local, "\x00") || len(t.Local) > 512 {
		return TopicName{}, fmt.Errorf("%w: topic %q: bad local name", ErrInvalidName, s)
	}
	return t, nil
}

func checkName(s string) error {
	if s == "" || len(s) > 256 {
		return fmt.Errorf("empty or too long")
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.=:", r)) {
			return fmt.Errorf("character %q not allowed", r)
		}
	}
	return nil
}

// CheckTenantName validates a tenant name.
func CheckTenantName(s string) error {
	if err := checkName(s); err != nil {
		return fmt.Errorf("%w: tenant %q: %v", ErrInvalidName, s, err)
	}
	return nil
}

// String is the fully qualified name.
func (t TopicName) String() string {
	return t.Domain + "://" + t.Tenant + "/" + t.Namespace + "/" + t.Local
}

// NamespaceName is "tenant/namespace".
func (t TopicName) NamespaceName() string { return t.Tenant + "/" + t.Namespace }

// PartitionIndex returns the partition index encoded in the name, or -1.
func (t TopicName) PartitionIndex() int {
	i := strings.LastIndex(t.Local, partitionSuffix)
	if i < 0 {
		return -1
	}
	n, err := strconv.Atoi(t.Local[i+len(partitionSuffix):])
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// Base strips a "-partition-N" suffix.
func (t TopicName) Base() TopicName {
	if t.PartitionIndex() < 0 {
		return t
	}
	t.Local = t.Local[:strings.LastIndex(t.Local, partitionSuffix)]
	return t
}

// Partition returns the name of partition i of t.
func (t TopicName) Partition(i int) TopicName {
	t.Local = t.Local + partitionSuffix + strconv.Itoa(i)
	return t
}

// keyPath is the topic's path inside metadata keys (local name escaped so
// that it cannot add key segments).
func (t TopicName) keyPath() string {
	return t.Domain + "/" + t.Tenant + "/" + t.Namespace + "/" + url.PathEscape(t.Local)
}

// streamName is the name of the topic's stream in the core.
func (t TopicName) streamName() string { return "pulsar/" + t.keyPath() }

// StreamName is the name of the topic's stream (a new topic's; an existing
// topic's record names its stream too). It is the topic's ownership key in
// a cluster of brokers.
func (t TopicName) StreamName() string { return t.streamName() }

func escape(s string) string { return url.PathEscape(s) }

func unescape(s string) string {
	u, err := url.PathUnescape(s)
	if err != nil {
		return s
	}
	return u
}
