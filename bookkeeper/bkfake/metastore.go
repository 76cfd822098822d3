package bkfake

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/nereusstream/nereus-go/bookkeeper"
)

// MetaOp names a MetaStore operation for fault injection.
type MetaOp uint8

const (
	MetaCreate MetaOp = iota + 1
	MetaRead
	MetaWrite
	MetaDelete
)

type metaFault struct {
	op      MetaOp
	applied bool
	n       int
}

type znode struct {
	data    []byte
	version bookkeeper.Version
}

// MetaStore is an in-memory bookkeeper.MetadataStore with ZooKeeper's
// semantics (versions from 0, create-if-absent, CAS write and delete) and
// injectable unknown outcomes. Tests only.
type MetaStore struct {
	mu       sync.Mutex
	ledgers  map[int64]*znode
	writable map[string]string // bookie ID -> address
	readonly map[string]string
	faults   []*metaFault
	ops      map[MetaOp]int
	markers  map[string][]byte
	// instanceID is the cluster's INSTANCEID.
	instanceID string
}

// NewMetaStore returns an empty store.
func NewMetaStore() *MetaStore {
	return &MetaStore{ledgers: map[int64]*znode{}, writable: map[string]string{}, readonly: map[string]string{},
		ops: map[MetaOp]int{}, markers: map[string][]byte{}}
}

// AddBookie registers a writable bookie.
func (m *MetaStore) AddBookie(id, addr string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.readonly, id)
	m.writable[id] = addr
}

// RemoveBookie unregisters a bookie (it stays resolvable by its ID if that
// is host:port, as with ZooKeeper).
func (m *MetaStore) RemoveBookie(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.writable, id)
	delete(m.readonly, id)
}

// InjectUnknown makes the next n operations of kind op fail with
// ErrMetadataUnavailable ("connection loss"). If applied, each one takes
// effect before its answer is lost; otherwise it does not.
func (m *MetaStore) InjectUnknown(op MetaOp, applied bool, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.faults = append(m.faults, &metaFault{op: op, applied: applied, n: n})
}

// Ops returns how many operations of a kind were attempted.
func (m *MetaStore) Ops(op MetaOp) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ops[op]
}

// Ledger returns a ledger's raw metadata and version.
func (m *MetaStore) Ledger(id int64) ([]byte, bookkeeper.Version, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	z := m.ledgers[id]
	if z == nil {
		return nil, 0, false
	}
	return append([]byte(nil), z.data...), z.version, true
}

// PutLedger overwrites a ledger's metadata unconditionally (a foreign
// writer in tests).
func (m *MetaStore) PutLedger(id int64, data []byte) bookkeeper.Version {
	m.mu.Lock()
	defer m.mu.Unlock()
	z := m.ledgers[id]
	if z == nil {
		z = &znode{version: -1}
		m.ledgers[id] = z
	}
	z.data = append([]byte(nil), data...)
	z.version++
	return z.version
}

// LedgerIDs returns the IDs with metadata, sorted.
func (m *MetaStore) LedgerIDs() []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]int64, 0, len(m.ledgers))
	for id := range m.ledgers {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// fault returns (fail, applyFirst) for the next op of a kind.
func (m *MetaStore) faultLocked(op MetaOp) (bool, bool) {
	m.ops[op]++
	for i, f := range m.faults {
		if f.op == op && f.n > 0 {
			f.n--
			if f.n == 0 {
				m.faults = append(m.faults[:i], m.faults[i+1:]...)
			}
			return true, f.applied
		}
	}
	return false, false
}

var errLost = fmt.Errorf("%w: injected connection loss", bookkeeper.ErrMetadataUnavailable)

func (m *MetaStore) CreateLedgerMetadata(ctx context.Context, id int64, data []byte) (bookkeeper.Version, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("%w: %v", bookkeeper.ErrMetadataUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	fail, apply := m.faultLocked(MetaCreate)
	if fail && !apply {
		return 0, errLost
	}
	if m.ledgers[id] != nil {
		if fail {
			return 0, errLost
		}
		return 0, fmt.Errorf("%w: ledger %d", bookkeeper.ErrLedgerExists, id)
	}
	m.ledgers[id] = &znode{data: append([]byte(nil), data...)}
	if fail {
		return 0, errLost
	}
	return 0, nil
}

func (m *MetaStore) ReadLedgerMetadata(ctx context.Context, id int64) ([]byte, bookkeeper.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("%w: %v", bookkeeper.ErrMetadataUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if fail, _ := m.faultLocked(MetaRead); fail {
		return nil, 0, errLost
	}
	z := m.ledgers[id]
	if z == nil {
		return nil, 0, fmt.Errorf("%w: ledger %d", bookkeeper.ErrNoSuchLedger, id)
	}
	return append([]byte(nil), z.data...), z.version, nil
}

func (m *MetaStore) WriteLedgerMetadata(ctx context.Context, id int64, data []byte, expected bookkeeper.Version) (bookkeeper.Version, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("%w: %v", bookkeeper.ErrMetadataUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	fail, apply := m.faultLocked(MetaWrite)
	if fail && !apply {
		return 0, errLost
	}
	z := m.ledgers[id]
	switch {
	case z == nil:
		if fail {
			return 0, errLost
		}
		return 0, fmt.Errorf("%w: ledger %d", bookkeeper.ErrNoSuchLedger, id)
	case z.version != expected:
		if fail {
			return 0, errLost
		}
		return 0, fmt.Errorf("%w: ledger %d at version %d, expected %d", bookkeeper.ErrBadVersion, id, z.version, expected)
	}
	z.data = append([]byte(nil), data...)
	z.version++
	if fail {
		return 0, errLost
	}
	return z.version, nil
}

func (m *MetaStore) DeleteLedgerMetadata(ctx context.Context, id int64, expected bookkeeper.Version) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %v", bookkeeper.ErrMetadataUnavailable, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	fail, apply := m.faultLocked(MetaDelete)
	if fail && !apply {
		return errLost
	}
	z := m.ledgers[id]
	switch {
	case z == nil:
		if fail {
			return errLost
		}
		return fmt.Errorf("%w: ledger %d", bookkeeper.ErrNoSuchLedger, id)
	case z.version != expected:
		if fail {
			return errLost
		}
		return fmt.Errorf("%w: ledger %d at version %d, expected %d", bookkeeper.ErrBadVersion, id, z.version, expected)
	}
	delete(m.ledgers, id)
	if fail {
		return errLost
	}
	return nil
}

func (m *MetaStore) WritableBookies(ctx context.Context) ([]bookkeeper.BookieInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]bookkeeper.BookieInfo, 0, len(m.writable))
	for id, addr := range m.writable {
		out = append(out, bookkeeper.BookieInfo{ID: id, Addr: addr})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func (m *MetaStore) ResolveBookie(ctx context.Context, id string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a, ok := m.writable[id]; ok {
		return a, nil
	}
	if a, ok := m.readonly[id]; ok {
		return a, nil
	}
	return id, nil
}

// Cluster is a MetaStore with n fake bookies registered in it.
type Cluster struct {
	Meta    *MetaStore
	Bookies []*Bookie
}

// NewCluster starts n fake bookies and registers them.
func NewCluster(n int) (*Cluster, error) {
	c := &Cluster{Meta: NewMetaStore()}
	for i := 0; i < n; i++ {
		b, err := NewBookie()
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Bookies = append(c.Bookies, b)
		c.Meta.AddBookie(b.ID(), b.ID())
	}
	return c, nil
}

// Bookie returns the fake bookie with the given ID (nil if none).
func (c *Cluster) Bookie(id string) *Bookie {
	for _, b := range c.Bookies {
		if b.ID() == id {
			return b
		}
	}
	return nil
}

// Close stops every bookie.
func (c *Cluster) Close() {
	for _, b := range c.Bookies {
		b.Close()
	}
}

// SetInstanceID sets the cluster instance ID (default "fake-instance").
func (m *MetaStore) SetInstanceID(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.instanceID = id
}

// InstanceID mirrors ZKStore.InstanceID.
func (m *MetaStore) InstanceID(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.instanceID == "" {
		return "fake-instance", nil
	}
	return m.instanceID, nil
}

// Root mirrors ZKStore.Root.
func (m *MetaStore) Root() string { return "/ledgers" }

// CreateMarker mirrors ZKStore.CreateMarker.
func (m *MetaStore) CreateMarker(ctx context.Context, dir, name string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := dir + "/" + name
	if _, ok := m.markers[k]; ok {
		return fmt.Errorf("%w: marker %s", bookkeeper.ErrLedgerExists, k)
	}
	m.markers[k] = append([]byte(nil), data...)
	return nil
}

// ReadMarker mirrors ZKStore.ReadMarker.
func (m *MetaStore) ReadMarker(ctx context.Context, dir, name string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.markers[dir+"/"+name]
	if !ok {
		return nil, fmt.Errorf("%w: marker %s/%s", bookkeeper.ErrNoSuchLedger, dir, name)
	}
	return append([]byte(nil), d...), nil
}

// DeleteMarker mirrors ZKStore.DeleteMarker.
func (m *MetaStore) DeleteMarker(ctx context.Context, dir, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.markers, dir+"/"+name)
	return nil
}

// WriteMarker mirrors ZKStore.WriteMarker.
func (m *MetaStore) WriteMarker(ctx context.Context, dir, name string, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.markers[dir+"/"+name] = append([]byte(nil), data...)
	return nil
}

// ClearFaults removes every injected fault.
func (m *MetaStore) ClearFaults() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.faults = nil
}
