package managedledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/stream"
)

// Metadata key layout (all under "pulsar/").
const (
	keyRoot        = "pulsar/"
	keyLedgerSeq   = "pulsar/ledger-id-seq"
	keyBrokerSeq   = "pulsar/broker-incarnation-seq"
	keyTenants     = "pulsar/tenants/"     // + tenant
	keyNamespaces  = "pulsar/namespaces/"  // + tenant/ns
	keyPartitioned = "pulsar/partitioned/" // + topic keyPath
	keyTopics      = "pulsar/topics/"      // + topic keyPath
	keyCursors     = "pulsar/cursors/"     // + topic keyPath + "/" + escaped sub
	keyState       = "pulsar/state/"       // + kind + "/" + topic keyPath
)

// Writers hands out append sessions when ownership is decided outside the
// factory (the cluster node, cluster.Node: only a stream's owner gets one,
// taken over from a dead owner or handed over by a live one).
type Writers interface {
	Writer(ctx context.Context, id stream.ID, name string) (stream.Session, error)
	Release(ctx context.Context, id stream.ID) error
	Lost(s stream.Session)
}

// Config configures a Factory.
type Config struct {
	// Writers, when set, is where ledgers take and give up their append
	// sessions (WriterID, AuthorityEpoch and SessionTTL are then unused).
	// Nil: ledgers acquire sessions from the storage directly.
	Writers Writers
	// WriterID names this broker to the stream core's append sessions.
	WriterID string
	// AuthorityEpoch is this broker incarnation's fencing epoch (see
	// AllocateIncarnation): a broker started later takes over the append
	// sessions of an earlier one and fences it.
	AuthorityEpoch int64
	// SessionTTL is the append session TTL; 0 (the default) leaves it to
	// the stream core (stream.Config.SessionTTL, `nereus serve
	// --session-ttl`, default 30s), so one setting governs every protocol.
	SessionTTL time.Duration
	// Profile is the storage profile for new topic streams (default: the
	// core's default).
	Profile stream.Profile
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// EntryCountedTopics creates new topics in the old offset model (one
	// offset per entry; see CountsMessages). Only for tests of topics made
	// before the message-counted model existed.
	EntryCountedTopics bool
}

// Factory opens and creates ledgers, and owns the Pulsar catalog (tenants,
// namespaces, partitioned topics) in metadata.
type Factory struct {
	storage stream.Storage
	meta    metadata.Store
	cfg     Config

	wmu     sync.Mutex
	writers map[stream.ID]*sharedWriter
}

// NewFactory returns a Factory over the given storage and metadata.
func NewFactory(storage stream.Storage, meta metadata.Store, cfg Config) *Factory {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Factory{storage: storage, meta: meta, cfg: cfg, writers: map[stream.ID]*sharedWriter{}}
}

// AllocateIncarnation returns a new, strictly increasing broker incarnation
// number from metadata. A broker uses it as its append-session authority
// epoch and in generated producer names, so both are unique across
// restarts.
func AllocateIncarnation(ctx context.Context, meta metadata.Store) (int64, error) {
	return nextCounter(ctx, meta, keyBrokerSeq)
}

type topicRecord struct {
	LedgerID   int64     `json:"ledgerId"`
	StreamName string    `json:"stream"`
	StreamID   uint64    `json:"streamId"`
	CreatedAt  time.Time `json:"createdAt"`
	// Offsets is the topic's offset model: OffsetsPerMessage, or empty for
	// topics created before it existed (one offset per entry).
	Offsets string `json:"offsets,omitempty"`
}

// OffsetsPerMessage is the offset model of topics created by this version:
// a stream entry holds one Pulsar entry and covers one offset per message.
const OffsetsPerMessage = "message"

// Stream attributes of a topic's stream. AttrEntryFormat names the payload
// format of every entry, so that a projection (KoP) can refuse a stream
// whose format it does not know instead of guessing.
const (
	AttrProtocol    = "protocol"
	AttrTopic       = "topic"
	AttrEntryFormat = "pulsar.entry-format"
	// EntryFormatV2: each stream entry is one Pulsar entry — an optional
	// 0x0e02 broker-entry-metadata prefix, then the message from its
	// 0x0e01 magic on (checksum, MessageMetadata, single payload or batch)
	// — and RecordCount is its number of messages.
	EntryFormatV2 = "pulsar-entry-v2"
)

// Open returns the ledger of topic, creating topic and stream when create
// is set. Without create a missing topic is ErrTopicNotFound.
func (f *Factory) Open(ctx context.Context, topic TopicName, create bool) (*Ledger, error) {
	return f.open(ctx, topic, create, stream.ProfileUnspecified)
}

// CreateWithProfile opens topic, creating it with the given storage
// profile if it does not exist (an existing topic keeps its profile).
func (f *Factory) CreateWithProfile(ctx context.Context, topic TopicName, profile stream.Profile) (*Ledger, error) {
	return f.open(ctx, topic, true, profile)
}

// profileFor is the profile a new topic gets: the explicit one, else the
// namespace's storage-profile policy, else the broker default.
func (f *Factory) profileFor(ctx context.Context, topic TopicName, explicit stream.Profile) (stream.Profile, error) {
	if explicit != stream.ProfileUnspecified {
		return explicit, nil
	}
	p, err := f.GetNamespace(ctx, topic.NamespaceName())
	if err != nil {
		return 0, err
	}
	if p.StorageProfile != "" {
		return stream.ParseProfile(p.StorageProfile)
	}
	return f.cfg.Profile, nil
}

func (f *Factory) open(ctx context.Context, topic TopicName, create bool, profile stream.Profile) (*Ledger, error) {
	key := keyTopics + topic.keyPath()
	for attempt := 0; attempt < 16; attempt++ {
		var rec topicRecord
		_, ok, err := getRecord(ctx, f.meta, key, &rec)
		if err != nil {
			return nil, err
		}
		if ok {
			info, err := f.storage.Describe(ctx, stream.ID(rec.StreamID))
			if err != nil {
				return nil, fmt.Errorf("topic %s: stream %s: %w", topic, rec.StreamName, err)
			}
			return &Ledger{f: f, name: topic, rec: rec, id: info.ID}, nil
		}
		if !create {
			return nil, fmt.Errorf("%w: %s", ErrTopicNotFound, topic)
		}
		if err := f.checkNamespace(ctx, topic.NamespaceName()); err != nil {
			return nil, err
		}
		if _, ok, err := f.getPartitioned(ctx, topic); err != nil {
			return nil, err
		} else if ok {
			return nil, fmt.Errorf("%w: %s is a partitioned topic; use its partitions", ErrTopicExists, topic)
		}
		prof, err := f.profileFor(ctx, topic, profile)
		if err != nil {
			return nil, err
		}
		ledgerID, err := nextCounter(ctx, f.meta, keyLedgerSeq)
		if err != nil {
			return nil, err
		}
		// The stream first: a crash before the record leaves a stream the
		// next create adopts (Create returns the existing stream).
		attrs := map[string]string{AttrProtocol: "pulsar", AttrTopic: topic.String()}
		if !f.cfg.EntryCountedTopics {
			attrs[AttrEntryFormat] = EntryFormatV2
		}
		info, err := f.storage.Create(ctx, topic.streamName(), stream.CreateOptions{Profile: prof, Attributes: attrs})
		if err != nil && !errors.Is(err, stream.ErrStreamExists) {
			return nil, fmt.Errorf("topic %s: create stream: %w", topic, err)
		}
		rec = topicRecord{LedgerID: ledgerID, StreamName: info.Name, StreamID: uint64(info.ID), CreatedAt: time.Now().UTC()}
		if info.Attributes[AttrEntryFormat] == EntryFormatV2 {
			// Adopted or created: the stream's own label decides, so a
			// stream left by a crashed create keeps its model.
			rec.Offsets = OffsetsPerMessage
		}
		val, err := encodeRecord(rec)
		if err != nil {
			return nil, err
		}
		_, err = f.meta.Put(ctx, key, val, metadata.NotExists)
		switch metadata.Classify(err) {
		case metadata.Applied:
			f.cfg.Logger.Info("pulsar topic created", "topic", topic.String(), "ledgerId", ledgerID, "stream", info.Name)
			return &Ledger{f: f, name: topic, rec: rec, id: info.ID}, nil
		case metadata.Conflict, metadata.Unknown:
			continue // someone (maybe we) created it: re-read.
		default:
			return nil, err
		}
	}
	return nil, fmt.Errorf("%w: open %s", ErrTooManyConflicts, topic)
}

// Exists reports whether topic exists as a non-partitioned topic (or a
// partition).
func (f *Factory) Exists(ctx context.Context, topic TopicName) (bool, error) {
	_, err := f.meta.Get(ctx, keyTopics+topic.keyPath())
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Delete removes a topic: its stream, cursors, per-topic state and record.
// Deleting a missing topic is ErrTopicNotFound. The caller must have closed
// the topic's producers and consumers.
func (f *Factory) Delete(ctx context.Context, topic TopicName) error {
	key := keyTopics + topic.keyPath()
	var rec topicRecord
	ver, ok, err := getRecord(ctx, f.meta, key, &rec)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s", ErrTopicNotFound, topic)
	}
	if err := f.storage.Delete(ctx, stream.ID(rec.StreamID)); err != nil && !errors.Is(err, stream.ErrStreamNotFound) {
		return fmt.Errorf("topic %s: delete stream: %w", topic, err)
	}
	prefix := keyCursors + topic.keyPath() + "/"
	recs, err := f.meta.RangeScan(ctx, prefix, prefix+"\xff", 0)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := f.meta.Delete(ctx, r.Key, metadata.AnyVersion); err != nil && !errors.Is(err, metadata.ErrKeyNotFound) {
			return err
		}
	}
	for _, kind := range stateKinds {
		if err := f.meta.Delete(ctx, keyState+kind+"/"+topic.keyPath(), metadata.AnyVersion); err != nil && !errors.Is(err, metadata.ErrKeyNotFound) {
			return err
		}
	}
	if err := f.meta.Delete(ctx, key, ver); err != nil && !errors.Is(err, metadata.ErrKeyNotFound) {
		return err
	}
	f.cfg.Logger.Info("pulsar topic deleted", "topic", topic.String())
	return nil
}

// ListTopics lists the non-partitioned topics and partitions of a namespace
// in the given domain, as fully qualified names.
func (f *Factory) ListTopics(ctx context.Context, domain, namespace string) ([]string, error) {
	prefix := keyTopics + domain + "/" + namespace + "/"
	recs, err := f.meta.RangeScan(ctx, prefix, prefix+"\xff", 0)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, domain+"://"+namespace+"/"+unescape(strings.TrimPrefix(r.Key, prefix)))
	}
	return out, nil
}

// stateKinds are the per-topic state records Delete removes.
var stateKinds = []string{"schemas", "dedup", "policies", "delayed"}

// GetState reads the per-topic state record of kind (e.g. "schemas"). ok is
// false when absent.
func (f *Factory) GetState(ctx context.Context, topic TopicName, kind string) ([]byte, metadata.Version, bool, error) {
	rec, err := f.meta.Get(ctx, keyState+kind+"/"+topic.keyPath())
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, err
	}
	return rec.Value, rec.Version, true, nil
}

// PutState writes a per-topic state record with a version expectation
// (metadata.NotExists for a first write). Outcomes as metadata.Classify.
func (f *Factory) PutState(ctx context.Context, topic TopicName, kind string, value []byte, expected metadata.Version) (metadata.Version, error) {
	return f.meta.Put(ctx, keyState+kind+"/"+topic.keyPath(), value, expected)
}

// ---- catalog: tenants, namespaces, partitioned topics ----

// TenantInfo is a tenant's admin record (Pulsar's JSON shape).
type TenantInfo struct {
	AdminRoles      []string `json:"adminRoles"`
	AllowedClusters []string `json:"allowedClusters"`
}

// CreateTenant creates a tenant; ErrExists if present.
func (f *Factory) CreateTenant(ctx context.Context, name string, info TenantInfo) error {
	if err := CheckTenantName(name); err != nil {
		return err
	}
	return f.createKey(ctx, keyTenants+name, info)
}

// UpdateTenant overwrites a tenant's info; ErrNotFound if absent.
func (f *Factory) UpdateTenant(ctx context.Context, name string, info TenantInfo) error {
	var old TenantInfo
	ver, ok, err := getRecord(ctx, f.meta, keyTenants+name, &old)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: tenant %s", ErrNotFound, name)
	}
	val, err := encodeRecord(info)
	if err != nil {
		return err
	}
	_, err = f.meta.Put(ctx, keyTenants+name, val, ver)
	return err
}

// GetTenant returns a tenant's info.
func (f *Factory) GetTenant(ctx context.Context, name string) (TenantInfo, error) {
	var info TenantInfo
	_, ok, err := getRecord(ctx, f.meta, keyTenants+name, &info)
	if err == nil && !ok {
		err = fmt.Errorf("%w: tenant %s", ErrNotFound, name)
	}
	return info, err
}

// ListTenants lists tenant names.
func (f *Factory) ListTenants(ctx context.Context) ([]string, error) {
	return f.listChildren(ctx, keyTenants)
}

// DeleteTenant deletes an empty tenant.
func (f *Factory) DeleteTenant(ctx context.Context, name string) error {
	ns, err := f.ListNamespaces(ctx, name)
	if err != nil {
		return err
	}
	if len(ns) > 0 {
		return fmt.Errorf("%w: tenant %s has namespaces %v", ErrNotEmpty, name, ns)
	}
	return f.deleteKey(ctx, keyTenants+name)
}

// NamespacePolicies is the stored namespace record (a small subset of
// Pulsar's policies).
type NamespacePolicies struct {
	Deduplication *bool `json:"deduplicationEnabled,omitempty"`
	// Retention is Pulsar's namespace retention policy: how long and how
	// much of what every durable subscription acknowledged is kept (the
	// broker applies it to the topics' streams; nil: the broker default).
	Retention *RetentionPolicies `json:"retention_policies,omitempty"`
	// BacklogQuota is Pulsar's backlog_quota_map: per quota type
	// ("destination_storage", "message_age"), the limit and the policy
	// applied when a topic's backlog exceeds it.
	BacklogQuota map[string]BacklogQuota `json:"backlog_quota_map,omitempty"`
	// StorageProfile (a stream.Profile name) is the profile of topics
	// created in the namespace from now on; an existing topic keeps the
	// profile its stream was created with. Empty: the broker default.
	StorageProfile string `json:"storageProfile,omitempty"`
	// AuthPolicies are Pulsar's permissions on the namespace and its
	// topics (granted through the admin REST permissions paths; read by
	// the broker's authorization).
	AuthPolicies *AuthPolicies `json:"auth_policies,omitempty"`
}

// AuthPolicies is Pulsar's auth_policies: role → actions ("produce",
// "consume", "functions", ...) for the namespace, and per topic (full
// topic name, the partitioned base for partitions).
type AuthPolicies struct {
	NamespaceAuth   map[string][]string            `json:"namespace_auth"`
	DestinationAuth map[string]map[string][]string `json:"destination_auth"`
}

// RetentionPolicies is Pulsar's RetentionPolicies JSON (-1 = infinite).
type RetentionPolicies struct {
	RetentionTimeInMinutes int   `json:"retentionTimeInMinutes"`
	RetentionSizeInMB      int64 `json:"retentionSizeInMB"`
}

// BacklogQuota is Pulsar's BacklogQuota JSON. LimitSize is in bytes,
// LimitTime in seconds (-1 or 0: no limit of that kind); Limit is the
// deprecated alias of LimitSize that Pulsar still reports.
type BacklogQuota struct {
	Limit     int64  `json:"limit"`
	LimitSize int64  `json:"limitSize"`
	LimitTime int64  `json:"limitTime"`
	Policy    string `json:"policy"`
}

// TopicPolicies are the topic-level policies (pulsar-admin topics
// set-retention / set-backlog-quota), stored on the (base) topic: a
// partitioned topic's policies apply to all its partitions.
type TopicPolicies struct {
	Deduplication *bool                   `json:"deduplicationEnabled,omitempty"`
	Retention     *RetentionPolicies      `json:"retention_policies,omitempty"`
	BacklogQuota  map[string]BacklogQuota `json:"backlog_quota_map,omitempty"`
}

// GetTopicPolicies reads a topic's policies (zero when none are set).
func (f *Factory) GetTopicPolicies(ctx context.Context, topic TopicName) (TopicPolicies, error) {
	var tp TopicPolicies
	_, _, err := getRecord(ctx, f.meta, keyState+"policies/"+topic.Base().keyPath(), &tp)
	return tp, err
}

// UpdateTopicPolicies changes a topic's policies by CAS.
func (f *Factory) UpdateTopicPolicies(ctx context.Context, topic TopicName, update func(*TopicPolicies)) error {
	key := keyState + "policies/" + topic.Base().keyPath()
	for attempt := 0; attempt < 16; attempt++ {
		var tp TopicPolicies
		ver, ok, err := getRecord(ctx, f.meta, key, &tp)
		if err != nil {
			return err
		}
		if !ok {
			ver = metadata.NotExists
		}
		update(&tp)
		val, err := encodeRecord(tp)
		if err != nil {
			return err
		}
		_, err = f.meta.Put(ctx, key, val, ver)
		switch metadata.Classify(err) {
		case metadata.Applied:
			return nil
		case metadata.Conflict, metadata.Unknown:
			continue
		default:
			return err
		}
	}
	return ErrTooManyConflicts
}

// CreateNamespace creates tenant/ns; the tenant must exist.
func (f *Factory) CreateNamespace(ctx context.Context, namespace string, p NamespacePolicies) error {
	tenant, ns, ok := strings.Cut(namespace, "/")
	if !ok || checkName(tenant) != nil || checkName(ns) != nil || strings.Contains(ns, "/") {
		return fmt.Errorf("%w: namespace %q", ErrInvalidName, namespace)
	}
	if _, err := f.GetTenant(ctx, tenant); err != nil {
		return err
	}
	return f.createKey(ctx, keyNamespaces+namespace, p)
}

// GetNamespace returns a namespace's policies.
func (f *Factory) GetNamespace(ctx context.Context, namespace string) (NamespacePolicies, error) {
	var p NamespacePolicies
	_, ok, err := getRecord(ctx, f.meta, keyNamespaces+namespace, &p)
	if err == nil && !ok {
		err = fmt.Errorf("%w: namespace %s", ErrNamespaceNotFound, namespace)
	}
	return p, err
}

// SetNamespacePolicies overwrites a namespace's policies by CAS.
func (f *Factory) SetNamespacePolicies(ctx context.Context, namespace string, update func(*NamespacePolicies)) error {
	for attempt := 0; attempt < 16; attempt++ {
		var p NamespacePolicies
		ver, ok, err := getRecord(ctx, f.meta, keyNamespaces+namespace, &p)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: namespace %s", ErrNamespaceNotFound, namespace)
		}
		update(&p)
		val, err := encodeRecord(p)
		if err != nil {
			return err
		}
		_, err = f.meta.Put(ctx, keyNamespaces+namespace, val, ver)
		switch metadata.Classify(err) {
		case metadata.Applied:
			return nil
		case metadata.Conflict, metadata.Unknown:
			continue
		default:
			return err
		}
	}
	return ErrTooManyConflicts
}

func (f *Factory) checkNamespace(ctx context.Context, namespace string) error {
	_, err := f.GetNamespace(ctx, namespace)
	return err
}

// ListNamespaces lists "tenant/ns" names of a tenant.
func (f *Factory) ListNamespaces(ctx context.Context, tenant string) ([]string, error) {
	names, err := f.listChildren(ctx, keyNamespaces+tenant+"/")
	for i := range names {
		names[i] = tenant + "/" + names[i]
	}
	return names, err
}

// DeleteNamespace deletes a namespace that has no topics.
func (f *Factory) DeleteNamespace(ctx context.Context, namespace string) error {
	for _, domain := range []string{"persistent", "non-persistent"} {
		ts, err := f.ListTopics(ctx, domain, namespace)
		if err != nil {
			return err
		}
		ps, err := f.ListPartitioned(ctx, domain, namespace)
		if err != nil {
			return err
		}
		if len(ts)+len(ps) > 0 {
			return fmt.Errorf("%w: namespace %s has topics", ErrNotEmpty, namespace)
		}
	}
	return f.deleteKey(ctx, keyNamespaces+namespace)
}

type partitionedRecord struct {
	Partitions int `json:"partitions"`
}

func (f *Factory) getPartitioned(ctx context.Context, topic TopicName) (int, bool, error) {
	var r partitionedRecord
	_, ok, err := getRecord(ctx, f.meta, keyPartitioned+topic.keyPath(), &r)
	return r.Partitions, ok, err
}

// PartitionCount returns the number of partitions of a partitioned topic,
// 0 for a non-partitioned or missing topic.
func (f *Factory) PartitionCount(ctx context.Context, topic TopicName) (int, error) {
	n, _, err := f.getPartitioned(ctx, topic)
	return n, err
}

// CreatePartitioned records a partitioned topic with n > 0 partitions. The
// partitions' streams are created on first use (or eagerly by the caller).
func (f *Factory) CreatePartitioned(ctx context.Context, topic TopicName, n int) error {
	if n <= 0 || topic.PartitionIndex() >= 0 {
		return fmt.Errorf("%w: partitioned topic %s with %d partitions", ErrInvalidName, topic, n)
	}
	if err := f.checkNamespace(ctx, topic.NamespaceName()); err != nil {
		return err
	}
	if ok, err := f.Exists(ctx, topic); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("%w: %s exists as a non-partitioned topic", ErrTopicExists, topic)
	}
	err := f.createKey(ctx, keyPartitioned+topic.keyPath(), partitionedRecord{Partitions: n})
	if errors.Is(err, ErrExists) {
		return fmt.Errorf("%w: %s", ErrTopicExists, topic)
	}
	return err
}

// UpdatePartitions grows a partitioned topic to n partitions (never
// shrinks, as in Pulsar).
func (f *Factory) UpdatePartitions(ctx context.Context, topic TopicName, n int) error {
	key := keyPartitioned + topic.keyPath()
	var r partitionedRecord
	ver, ok, err := getRecord(ctx, f.meta, key, &r)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: partitioned topic %s", ErrTopicNotFound, topic)
	}
	if n <= r.Partitions {
		return fmt.Errorf("%w: partitions can only grow (%d -> %d)", ErrInvalidName, r.Partitions, n)
	}
	val, err := encodeRecord(partitionedRecord{Partitions: n})
	if err != nil {
		return err
	}
	_, err = f.meta.Put(ctx, key, val, ver)
	return err
}

// DeletePartitioned deletes the partitioned-topic record (the caller
// deletes the partitions first).
func (f *Factory) DeletePartitioned(ctx context.Context, topic TopicName) error {
	if err := f.DeleteState(ctx, topic, "policies"); err != nil {
		return err
	}
	err := f.deleteKey(ctx, keyPartitioned+topic.keyPath())
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: partitioned topic %s", ErrTopicNotFound, topic)
	}
	return err
}

// ListPartitioned lists the partitioned topics of a namespace.
func (f *Factory) ListPartitioned(ctx context.Context, domain, namespace string) ([]string, error) {
	names, err := f.listChildren(ctx, keyPartitioned+domain+"/"+namespace+"/")
	for i := range names {
		names[i] = domain + "://" + namespace + "/" + names[i]
	}
	return names, err
}

func (f *Factory) createKey(ctx context.Context, key string, v any) error {
	val, err := encodeRecord(v)
	if err != nil {
		return err
	}
	_, err = f.meta.Put(ctx, key, val, metadata.NotExists)
	switch metadata.Classify(err) {
	case metadata.Applied:
		return nil
	case metadata.Conflict:
		return fmt.Errorf("%w: %s", ErrExists, strings.TrimPrefix(key, keyRoot))
	case metadata.Unknown:
		// Settle by re-reading: present with our bytes means applied.
		rec, gerr := f.meta.Get(ctx, key)
		if gerr == nil && string(rec.Value) == string(val) {
			return nil
		}
		return err
	default:
		return err
	}
}

func (f *Factory) deleteKey(ctx context.Context, key string) error {
	err := f.meta.Delete(ctx, key, metadata.AnyVersion)
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return fmt.Errorf("%w: %s", ErrNotFound, strings.TrimPrefix(key, keyRoot))
	}
	return err
}

// listChildren returns the direct child names under prefix (escaped
// segments unescaped).
func (f *Factory) listChildren(ctx context.Context, prefix string) ([]string, error) {
	recs, err := f.meta.RangeScan(ctx, prefix, prefix+"\xff", 0)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, r := range recs {
		name, _, _ := strings.Cut(strings.TrimPrefix(r.Key, prefix), "/")
		name = unescape(name)
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// EnsureDefaults creates the "public" tenant and "public/default" namespace
// if missing, as a Pulsar standalone does.
func (f *Factory) EnsureDefaults(ctx context.Context) error {
	if err := f.CreateTenant(ctx, DefaultTenant, TenantInfo{AllowedClusters: []string{"standalone"}}); err != nil && !errors.Is(err, ErrExists) {
		return err
	}
	if err := f.CreateNamespace(ctx, DefaultTenant+"/"+DefaultNamespace, NamespacePolicies{}); err != nil && !errors.Is(err, ErrExists) {
		return err
	}
	return nil
}

// DeleteState removes a per-topic state record (absent is not an error).
func (f *Factory) DeleteState(ctx context.Context, topic TopicName, kind string) error {
	err := f.meta.Delete(ctx, keyState+kind+"/"+topic.keyPath(), metadata.AnyVersion)
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return nil
	}
	return err
}
