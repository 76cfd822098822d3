package namespace

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper"
	"github.com/nereusstream/nereus-go/metadata"
)

// Block geometry.
const (
	BlockBits = 40
	BlockSize = int64(1) << BlockBits
	// MinBlock is the first reservable block: IDs from 2^62 up.
	MinBlock = int64(1) << (62 - BlockBits)
	// MaxBlock is the last block of the positive 63-bit space.
	MaxBlock = int64(1)<<(63-BlockBits) - 1
)

// MarkerDir is the znode directory under the ledgers root holding markers.
const MarkerDir = "nereus-namespace"

// OwnerKey is the custom-metadata key of every ledger created through a
// Namespace; its value is the deployment ID.
const OwnerKey = "nereus/deployment"

const formatV1 = "NBKNS1"

// Errors.
var (
	// ErrNoProof: no reservation record exists; creates and deletes are
	// refused until Reserve has run for this deployment.
	ErrNoProof = errors.New("bookkeeper/namespace: no ledger-ID namespace reservation: ledger creates and deletes are refused (run the namespace reservation first)")
	// ErrProofInvalid: the reservation record or the cluster marker is
	// missing, corrupt, or does not match this cluster and deployment;
	// creates and deletes are refused.
	ErrProofInvalid = errors.New("bookkeeper/namespace: ledger-ID namespace proof invalid: ledger creates and deletes are refused")
	// ErrReserved: Reserve found the block (or this deployment's record)
	// taken by another reservation. Nothing was written.
	ErrReserved = errors.New("bookkeeper/namespace: block already reserved by another deployment")
	// ErrExhausted: every ID of the block was allocated.
	ErrExhausted = errors.New("bookkeeper/namespace: ledger-ID block exhausted")
	// ErrNotAllocated: CreateLedger with an ID this process did not
	// allocate, or already used. Nothing was written.
	ErrNotAllocated = errors.New("bookkeeper/namespace: ledger ID was not allocated here or was already used")
	// ErrNotOwner: DeleteLedger of an ID outside the block, or of a ledger
	// without this deployment's owner tag. Nothing was deleted.
	ErrNotOwner = errors.New("bookkeeper/namespace: ledger is not in this deployment's namespace")
	// ErrOutcomeUnknown: a metadata write's answer was lost and re-reading
	// could not settle it; see each operation.
	ErrOutcomeUnknown = errors.New("bookkeeper/namespace: outcome unknown")
)

// Range is an inclusive ledger-ID range.
type Range struct{ First, Last int64 }

// Contains reports whether id is in the range.
func (r Range) Contains(id int64) bool { return id >= r.First && id <= r.Last }

// BlockRange returns block b's range.
func BlockRange(b int64) Range {
	return Range{First: b << BlockBits, Last: b<<BlockBits + BlockSize - 1}
}

// Cluster is the BookKeeper side of the proof: the cluster identity and the
// marker znodes. *bookkeeper.ZKStore implements it (bkfake.MetaStore too).
type Cluster interface {
	Root() string
	InstanceID(ctx context.Context) (string, error)
	CreateMarker(ctx context.Context, dir, name string, data []byte) error
	ReadMarker(ctx context.Context, dir, name string) ([]byte, error)
}

// Reservation is the persisted reservation (record and marker content).
type Reservation struct {
	Format       string `json:"format"`
	DeploymentID string `json:"deploymentId"`
	Alias        string `json:"alias"`
	LedgersRoot  string `json:"ledgersRoot"`
	InstanceID   string `json:"instanceId"`
	Block        int64  `json:"block"`
	First        int64  `json:"first"`
	Last         int64  `json:"last"`
	CreatedMs    int64  `json:"createdMs"`
}

// Range returns the reserved range.
func (r *Reservation) Range() Range { return Range{r.First, r.Last} }

func encode(r *Reservation) []byte {
	j, _ := json.Marshal(r)
	out := make([]byte, 4, 4+len(j))
	binary.BigEndian.PutUint32(out, crc32.Checksum(j, crc32.MakeTable(crc32.Castagnoli)))
	return append(out, j...)
}

func decode(b []byte) (*Reservation, error) {
	if len(b) < 5 {
		return nil, fmt.Errorf("%w: record of %d bytes", ErrProofInvalid, len(b))
	}
	if crc32.Checksum(b[4:], crc32.MakeTable(crc32.Castagnoli)) != binary.BigEndian.Uint32(b) {
		return nil, fmt.Errorf("%w: record checksum mismatch", ErrProofInvalid)
	}
	var r Reservation
	if err := json.Unmarshal(b[4:], &r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProofInvalid, err)
	}
	if r.Format != formatV1 {
		return nil, fmt.Errorf("%w: record format %q, want %q", ErrProofInvalid, r.Format, formatV1)
	}
	return &r, nil
}

// Config names the stores a Namespace works with.
type Config struct {
	// Meta is the Nereus metadata store holding the record and counter.
	Meta metadata.Store
	// Cluster is the BookKeeper cluster's ZooKeeper side.
	Cluster Cluster
	// Client creates and deletes the ledgers (Open and later calls only).
	Client *bookkeeper.Client
	// Alias names the BookKeeper cluster in Nereus metadata; default "default".
	Alias string
}

func (c *Config) alias() string {
	if c.Alias == "" {
		return "default"
	}
	return c.Alias
}

func (c *Config) recordKey() string { return "bookkeeper/" + c.alias() + "/namespace/reservation" }
func (c *Config) counterKey() string {
	return "bookkeeper/" + c.alias() + "/namespace/next"
}
func markerName(block int64) string { return "block-" + strconv.FormatInt(block, 10) }

// Reserve claims block for this deployment on the cluster (the one-time
// bootstrap of a deployment; idempotent: calling it again returns the same
// reservation). The marker is created first: it is the atomic claim on the
// cluster; the record follows.
func Reserve(ctx context.Context, cfg Config, block int64) (*Reservation, error) {
	if block < MinBlock || block > MaxBlock {
		return nil, fmt.Errorf("bookkeeper/namespace: block %d outside [%d, %d]", block, MinBlock, MaxBlock)
	}
	// An existing record decides: ours already (return it) or another block.
	if rec, err := cfg.Meta.Get(ctx, cfg.recordKey()); err == nil {
		r, derr := decode(rec.Value)
		if derr != nil {
			return nil, derr
		}
		if r.Block != block {
			return nil, fmt.Errorf("%w: this deployment already reserved block %d", ErrReserved, r.Block)
		}
		if _, err := verify(ctx, cfg, r); err != nil {
			return nil, err
		}
		return r, nil
	} else if !errors.Is(err, metadata.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: reading the reservation: %v", ErrOutcomeUnknown, err)
	}
	inst, err := cfg.Cluster.InstanceID(ctx)
	if err != nil {
		return nil, fmt.Errorf("bookkeeper/namespace: reading the cluster INSTANCEID: %w", err)
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	rg := BlockRange(block)
	r := &Reservation{Format: formatV1, DeploymentID: hex.EncodeToString(id[:]), Alias: cfg.alias(),
		LedgersRoot: cfg.Cluster.Root(), InstanceID: inst, Block: block, First: rg.First, Last: rg.Last,
		CreatedMs: time.Now().UnixMilli()}
	data := encode(r)
	if err := cfg.Cluster.CreateMarker(ctx, MarkerDir, markerName(block), data); err != nil {
		// Exists, or unknown: the marker's content decides whose it is.
		cur, rerr := cfg.Cluster.ReadMarker(ctx, MarkerDir, markerName(block))
		switch {
		case rerr == nil && bytes.Equal(cur, data):
			// Our create landed.
		case rerr == nil:
			return nil, fmt.Errorf("%w: marker %s/%s exists", ErrReserved, MarkerDir, markerName(block))
		case errors.Is(rerr, bookkeeper.ErrNoSuchLedger) && errors.Is(err, bookkeeper.ErrLedgerExists):
			return nil, fmt.Errorf("%w: marker appeared and vanished; retry", ErrOutcomeUnknown)
		case errors.Is(rerr, bookkeeper.ErrNoSuchLedger):
			return nil, fmt.Errorf("bookkeeper/namespace: creating the marker failed (not applied): %w", err)
		default:
			return nil, fmt.Errorf("%w: marker create: %v; read back: %v", ErrOutcomeUnknown, err, rerr)
		}
	}
	if _, err := cfg.Meta.Put(ctx, cfg.recordKey(), data, metadata.NotExists); err != nil {
		rec, gerr := cfg.Meta.Get(ctx, cfg.recordKey())
		switch {
		case gerr == nil && bytes.Equal(rec.Value, data):
		case gerr == nil:
			// Another process of this deployment reserved concurrently; our
			// marker then holds a deployment ID nobody records. Report it.
			return nil, fmt.Errorf("%w: a concurrent reservation wrote the record first", ErrReserved)
		default:
			return nil, fmt.Errorf("%w: reservation record: %v", ErrOutcomeUnknown, err)
		}
	}
	return r, nil
}

// verify checks a reservation against the cluster; it returns the range.
func verify(ctx context.Context, cfg Config, r *Reservation) (Range, error) {
	if r.Block < MinBlock || r.Block > MaxBlock || r.Range() != BlockRange(r.Block) {
		return Range{}, fmt.Errorf("%w: block %d / range [%d, %d] is not a reservable block", ErrProofInvalid, r.Block, r.First, r.Last)
	}
	if r.Alias != cfg.alias() {
		return Range{}, fmt.Errorf("%w: reservation for cluster alias %q, configured %q", ErrProofInvalid, r.Alias, cfg.alias())
	}
	if root := cfg.Cluster.Root(); r.LedgersRoot != root {
		return Range{}, fmt.Errorf("%w: reservation for ledgers root %q, cluster root is %q", ErrProofInvalid, r.LedgersRoot, root)
	}
	inst, err := cfg.Cluster.InstanceID(ctx)
	if err != nil {
		return Range{}, fmt.Errorf("%w: reading the cluster INSTANCEID: %v", ErrProofInvalid, err)
	}
	if inst != r.InstanceID {
		return Range{}, fmt.Errorf("%w: reservation for BookKeeper instance %s, cluster is %s", ErrProofInvalid, r.InstanceID, inst)
	}
	m, err := cfg.Cluster.ReadMarker(ctx, MarkerDir, markerName(r.Block))
	if err != nil {
		return Range{}, fmt.Errorf("%w: marker %s/%s/%s: %v", ErrProofInvalid, r.LedgersRoot, MarkerDir, markerName(r.Block), err)
	}
	mr, err := decode(m)
	if err != nil {
		return Range{}, fmt.Errorf("marker: %w", err)
	}
	if *mr != *r {
		return Range{}, fmt.Errorf("%w: marker names deployment %s, record %s", ErrProofInvalid, mr.DeploymentID, r.DeploymentID)
	}
	return r.Range(), nil
}

// Namespace is an opened, verified reservation. Safe for concurrent use.
type Namespace struct {
	cfg Config
	res *Reservation

	mu        sync.Mutex
	allocated map[int64]bool // allocated in this process, not yet used
}

// Open loads the reservation record and verifies the proof.
func Open(ctx context.Context, cfg Config) (*Namespace, error) {
	if cfg.Meta == nil || cfg.Cluster == nil {
		return nil, fmt.Errorf("bookkeeper/namespace: Config.Meta and Config.Cluster are required")
	}
	rec, err := cfg.Meta.Get(ctx, cfg.recordKey())
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w (key %s)", ErrNoProof, cfg.recordKey())
	}
	if err != nil {
		return nil, fmt.Errorf("bookkeeper/namespace: reading the reservation: %w", err)
	}
	r, err := decode(rec.Value)
	if err != nil {
		return nil, err
	}
	if _, err := verify(ctx, cfg, r); err != nil {
		return nil, err
	}
	return &Namespace{cfg: cfg, res: r, allocated: map[int64]bool{}}, nil
}

// Reservation returns the verified reservation.
func (n *Namespace) Reservation() Reservation { return *n.res }

// Range returns the reserved range.
func (n *Namespace) Range() Range { return n.res.Range() }

// Verify re-checks the proof against the stores (as CreateLedger and
// DeleteLedger do before acting).
func (n *Namespace) Verify(ctx context.Context) error {
	rec, err := n.cfg.Meta.Get(ctx, n.cfg.recordKey())
	if errors.Is(err, metadata.ErrKeyNotFound) {
		return fmt.Errorf("%w (key %s)", ErrNoProof, n.cfg.recordKey())
	}
	if err != nil {
		return fmt.Errorf("%w: reading the reservation: %v", ErrProofInvalid, err)
	}
	r, err := decode(rec.Value)
	if err != nil {
		return err
	}
	if *r != *n.res {
		return fmt.Errorf("%w: the reservation record changed since Open", ErrProofInvalid)
	}
	_, err = verify(ctx, n.cfg, r)
	return err
}

// Allocate hands out the next never-used ID of the block by a CAS on the
// counter record. An ID whose CAS answer was lost is burnt (the counter
// only moves forward; IDs are plentiful, reuse is not allowed).
func (n *Namespace) Allocate(ctx context.Context) (int64, error) {
	key := n.cfg.counterKey()
	for {
		next, ver := n.res.First, metadata.NotExists
		rec, err := n.cfg.Meta.Get(ctx, key)
		switch {
		case err == nil:
			if next, err = decodeCounter(rec.Value); err != nil {
				return 0, err
			}
			ver = rec.Version
		case !errors.Is(err, metadata.ErrKeyNotFound):
			return 0, fmt.Errorf("bookkeeper/namespace: reading the allocation counter: %w", err)
		}
		if !n.res.Range().Contains(next) {
			return 0, fmt.Errorf("%w: next ID %d", ErrExhausted, next)
		}
		_, err = n.cfg.Meta.Put(ctx, key, encodeCounter(next+1), ver)
		switch metadata.Classify(err) {
		case metadata.Applied:
			n.mu.Lock()
			n.allocated[next] = true
			n.mu.Unlock()
			return next, nil
		case metadata.Conflict:
			continue // another allocator won; re-read
		case metadata.Unknown:
			if ctx.Err() != nil {
				return 0, fmt.Errorf("%w: allocation CAS: %v (the ID, if taken, is burnt)", ErrOutcomeUnknown, err)
			}
			continue // re-read: whatever happened, the counter never goes back
		default:
			return 0, fmt.Errorf("bookkeeper/namespace: allocation counter: %w", err)
		}
	}
}

func encodeCounter(next int64) []byte {
	b := make([]byte, 12)
	binary.BigEndian.PutUint64(b[4:], uint64(next))
	binary.BigEndian.PutUint32(b, crc32.Checksum(b[4:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func decodeCounter(b []byte) (int64, error) {
	if len(b) != 12 || crc32.Checksum(b[4:], crc32.MakeTable(crc32.Castagnoli)) != binary.BigEndian.Uint32(b) {
		return 0, fmt.Errorf("%w: allocation counter corrupt", ErrProofInvalid)
	}
	return int64(binary.BigEndian.Uint64(b[4:])), nil
}

// CreateLedger creates the ledger with an ID this process allocated and
// has not used (the allocation is consumed whatever the outcome, so an ID
// is never created twice). It re-verifies the proof first and tags the
// ledger with this deployment's owner tag. Outcomes are CreateLedger's
// (bookkeeper package), plus ErrNoProof/ErrProofInvalid/ErrNotAllocated
// (not applied).
func (n *Namespace) CreateLedger(ctx context.Context, o bookkeeper.CreateOptions) (*bookkeeper.Writer, error) {
	if n.cfg.Client == nil {
		return nil, fmt.Errorf("bookkeeper/namespace: Config.Client is required to create ledgers")
	}
	n.mu.Lock()
	ok := n.allocated[o.LedgerID]
	delete(n.allocated, o.LedgerID)
	n.mu.Unlock()
	if !ok || !n.Range().Contains(o.LedgerID) {
		return nil, fmt.Errorf("%w: ledger %d", ErrNotAllocated, o.LedgerID)
	}
	if err := n.Verify(ctx); err != nil {
		return nil, err
	}
	custom := make(map[string][]byte, len(o.Custom)+1)
	for k, v := range o.Custom {
		custom[k] = v
	}
	custom[OwnerKey] = []byte(n.res.DeploymentID)
	o.Custom = custom
	return n.cfg.Client.CreateLedger(ctx, o)
}

// DeleteLedger physically deletes a ledger of this namespace: after
// re-verifying the proof, it checks that the ID is in the block and that
// the ledger's metadata, at exactly version expected, carries this
// deployment's owner tag; then deletes conditionally on that version.
func (n *Namespace) DeleteLedger(ctx context.Context, id int64, expected bookkeeper.Version) error {
	if n.cfg.Client == nil {
		return fmt.Errorf("bookkeeper/namespace: Config.Client is required to delete ledgers")
	}
	if !n.Range().Contains(id) {
		return fmt.Errorf("%w: ledger %d outside [%d, %d]", ErrNotOwner, id, n.res.First, n.res.Last)
	}
	if err := n.Verify(ctx); err != nil {
		return err
	}
	info, err := n.cfg.Client.ReadLedgerMetadata(ctx, id)
	if err != nil {
		return err
	}
	if info.Version != expected {
		return fmt.Errorf("%w: ledger %d at version %d, expected %d", bookkeeper.ErrBadVersion, id, info.Version, expected)
	}
	if string(info.Metadata.Custom[OwnerKey]) != n.res.DeploymentID {
		return fmt.Errorf("%w: ledger %d has owner tag %q", ErrNotOwner, id, info.Metadata.Custom[OwnerKey])
	}
	return n.cfg.Client.DeleteLedger(ctx, id, expected)
}
