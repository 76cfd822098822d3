package bookkeeper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper/meta"
	"github.com/nereusstream/nereus-go/bookkeeper/proto"
)

// Config configures a Client. Zero values mean the documented default.
type Config struct {
	// Metadata is the ledger metadata store and bookie registry; required.
	// Usually a *ZKStore from DialZK.
	Metadata MetadataStore
	// AddTimeout bounds how long an add may take to reach its ack quorum,
	// resends included. When it passes, the writer breaks (ErrWriterBroken)
	// and every unacknowledged add fails with an outcome-unknown AddError.
	// Default 5s (BookKeeper's addEntryTimeoutSec).
	AddTimeout time.Duration
	// RequestTimeout bounds one request to one bookie; a timeout closes that
	// connection (see bookieConn). Default 5s.
	RequestTimeout time.Duration
	// ConnectTimeout bounds resolving and dialing a bookie. Default 3s.
	ConnectTimeout time.Duration
	// ReconnectBackoff is how long sends to a bookie fail fast after a dial
	// to it failed. Default 250ms.
	ReconnectBackoff time.Duration
	// ResendBackoff is the first delay before an add is resent (identical
	// bytes) to a bookie that failed it; it doubles up to 1s. Default 20ms.
	ResendBackoff time.Duration
	// MaxFrameSize is the largest frame sent or accepted; it must not exceed
	// the bookies' nettyMaxFrameSizeBytes. Default 5 MiB.
	MaxFrameSize int
	// MaxPendingAdds bounds a writer's unacknowledged adds; AppendAsync
	// blocks (until its context ends) when the window is full. Default 1024.
	MaxPendingAdds int
	// ReadWindow bounds concurrent entry reads of one Read call. Default 64.
	ReadWindow int
	// Placement chooses new ensembles. Default RandomPlacement.
	Placement PlacementPolicy
	// Logger receives warnings (bookie failures, settled unknowns). Default
	// slog.Default().
	Logger *slog.Logger
}

func (c *Config) withDefaults() {
	if c.AddTimeout == 0 {
		c.AddTimeout = 5 * time.Second
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 3 * time.Second
	}
	if c.ReconnectBackoff == 0 {
		c.ReconnectBackoff = 250 * time.Millisecond
	}
	if c.ResendBackoff == 0 {
		c.ResendBackoff = 20 * time.Millisecond
	}
	if c.MaxFrameSize == 0 {
		c.MaxFrameSize = proto.DefaultMaxFrameSize
	}
	if c.MaxPendingAdds == 0 {
		c.MaxPendingAdds = 1024
	}
	if c.ReadWindow == 0 {
		c.ReadWindow = 64
	}
	if c.Placement == nil {
		c.Placement = RandomPlacement
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Client talks to one BookKeeper cluster: bookies over the v2 protocol and
// ledger metadata through a MetadataStore. It is safe for concurrent use.
// It keeps one connection per bookie, shared by all ledgers.
type Client struct {
	cfg    Config
	meta   MetadataStore
	pool   *connPool
	closed atomic.Bool
}

// New returns a client. It does no I/O.
func New(cfg Config) (*Client, error) {
	if cfg.Metadata == nil {
		return nil, fmt.Errorf("%w: Config.Metadata is required", ErrInvalidArgument)
	}
	cfg.withDefaults()
	if cfg.MaxFrameSize < 1024 {
		return nil, fmt.Errorf("%w: MaxFrameSize %d too small", ErrInvalidArgument, cfg.MaxFrameSize)
	}
	c := &Client{cfg: cfg, meta: cfg.Metadata}
	c.pool = newConnPool(c)
	return c, nil
}

// Close closes all bookie connections; outstanding requests fail. It does
// not close the MetadataStore.
func (c *Client) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.pool.close()
	}
	return nil
}

// Metadata returns the client's metadata store.
func (c *Client) Metadata() MetadataStore { return c.meta }

// DropConnection closes the client's connection to one bookie (if any);
// requests on it fail as if the network dropped. For fault-injection tests.
func (c *Client) DropConnection(bookieID string) { c.pool.closeBookie(bookieID) }

// call sends one request and waits for its response (or ctx).
func (c *Client) call(ctx context.Context, bookie string, key reqKey, frame []byte) (proto.Response, error) {
	type res struct {
		r   proto.Response
		err error
	}
	ch := make(chan res, 1)
	err := c.pool.send(bookie, &bookieRequest{key: key, frame: frame, timeout: c.cfg.RequestTimeout,
		cb: func(r proto.Response, err error) { ch <- res{r, err} }}, true)
	if err != nil {
		return proto.Response{}, err
	}
	select {
	case r := <-ch:
		return r.r, r.err
	case <-ctx.Done():
		return proto.Response{}, ctx.Err()
	}
}

// CreateOptions describes a new ledger.
type CreateOptions struct {
	// LedgerID is the caller-chosen ledger ID (>= 0). IDs must never be
	// reused, even after a delete: bookies remember fenced-and-deleted IDs.
	LedgerID int64
	// EnsembleSize, WriteQuorum, AckQuorum: E >= WQ >= AQ >= 1. Defaults
	// 3, 2, 2 when all three are zero.
	EnsembleSize, WriteQuorum, AckQuorum int
	// DigestType of the entries; default CRC32C.
	DigestType proto.DigestType
	// Password from which the master key is derived; may be empty.
	Password []byte
	// Custom is stored with the ledger metadata (BookKeeper custom metadata).
	Custom map[string][]byte
	// Ensemble, if set, is used instead of the placement policy.
	Ensemble []string
}

// CreateLedger creates the ledger's metadata (state OPEN) and returns a
// writer. The metadata exists before any byte reaches a bookie: bookies
// garbage-collect ledgers that have none.
//
// Outcomes:
//   - nil: applied; the ledger is ours.
//   - ErrLedgerExists: conflict; the ID holds someone else's ledger (another
//     cToken), untouched.
//   - ErrInvalidArgument, ErrNotEnoughBookies: not applied.
//   - ErrOutcomeUnknown: the metadata store lost the answer and re-reading
//     could not settle it before ctx ended; the ID may now hold our ledger.
//     Never reuse the ID; the error carries our cToken (CreateUnknownError).
//
// An unknown store answer is settled inside CreateLedger: after reconnecting,
// a linearizable read either finds the znode (ours iff the cToken matches)
// or proves the create never landed, in which case the create is retried.
func (c *Client) CreateLedger(ctx context.Context, o CreateOptions) (*Writer, error) {
	if c.closed.Load() {
		return nil, ErrClientClosed
	}
	if o.EnsembleSize == 0 && o.WriteQuorum == 0 && o.AckQuorum == 0 {
		o.EnsembleSize, o.WriteQuorum, o.AckQuorum = 3, 2, 2
	}
	if o.DigestType == 0 {
		o.DigestType = proto.DigestCRC32C
	}
	if o.LedgerID < 0 {
		return nil, fmt.Errorf("%w: ledger ID %d < 0", ErrInvalidArgument, o.LedgerID)
	}
	if o.EnsembleSize > 64 {
		return nil, fmt.Errorf("%w: ensemble size %d > 64", ErrInvalidArgument, o.EnsembleSize)
	}
	ensemble := o.Ensemble
	if ensemble == nil {
		bookies, err := c.meta.WritableBookies(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: listing bookies: %v", ErrNotEnoughBookies, err)
		}
		if ensemble, err = c.cfg.Placement(bookies, o.EnsembleSize); err != nil {
			return nil, err
		}
	}
	md := &meta.LedgerMetadata{
		EnsembleSize: int32(o.EnsembleSize), WriteQuorum: int32(o.WriteQuorum), AckQuorum: int32(o.AckQuorum),
		State: meta.StateOpen, LastEntryID: -1,
		Segments:   []meta.Segment{{FirstEntryID: 0, Ensemble: append([]string(nil), ensemble...)}},
		DigestType: o.DigestType, Password: append([]byte{}, o.Password...),
		CtimeMillis: time.Now().UnixMilli(), HasCtime: true,
		CToken: rand.Int64N(1<<62) + 1, HasCToken: true,
	}
	if len(o.Custom) > 0 {
		md.Custom = make(map[string][]byte, len(o.Custom))
		for k, v := range o.Custom {
			md.Custom[k] = append([]byte{}, v...)
		}
	}
	data, err := meta.Marshal(md)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	ver, err := c.createMetadata(ctx, o.LedgerID, md.CToken, data)
	if err != nil {
		return nil, err
	}
	return newWriter(c, o.LedgerID, md, ver)
}

// CreateUnknownError is the ErrOutcomeUnknown of a create: the ledger may
// exist with CToken.
type CreateUnknownError struct {
	LedgerID int64
	CToken   int64
	Err      error
}

func (e *CreateUnknownError) Error() string {
	return fmt.Sprintf("bookkeeper: create of ledger %d (cToken %d): outcome unknown: %v", e.LedgerID, e.CToken, e.Err)
}

func (e *CreateUnknownError) Unwrap() []error { return []error{e.Err, ErrOutcomeUnknown} }

func (c *Client) createMetadata(ctx context.Context, id, ctoken int64, data []byte) (Version, error) {
	backoff := 50 * time.Millisecond
	var lastErr error
	for {
		ver, err := c.meta.CreateLedgerMetadata(ctx, id, data)
		if err == nil {
			return ver, nil
		}
		if !errors.Is(err, ErrLedgerExists) {
			if ctx.Err() != nil {
				return 0, &CreateUnknownError{id, ctoken, err}
			}
			c.cfg.Logger.Warn("bookkeeper: ledger create outcome unknown; settling by re-reading", "ledger", id, "err", err)
		}
		lastErr = err
		// Settle: read until a definite answer.
		for {
			md, v, rerr := c.readMetadata(ctx, id)
			switch {
			case rerr == nil:
				if md.HasCToken && md.CToken == ctoken {
					return v, nil // our create landed (perhaps on an earlier attempt)
				}
				return 0, fmt.Errorf("%w: ledger %d (cToken %d is not ours)", ErrLedgerExists, id, md.CToken)
			case errors.Is(rerr, ErrNoSuchLedger):
				if errors.Is(lastErr, ErrLedgerExists) {
					// Existed a moment ago and is gone: deleted meanwhile.
					// Never reuse: report the conflict.
					return 0, fmt.Errorf("%w: ledger %d existed and was deleted during create", ErrLedgerExists, id)
				}
				// Definitely not created: try again.
			case errors.Is(rerr, meta.ErrMalformed):
				return 0, fmt.Errorf("%w: ledger %d holds foreign metadata: %v", ErrLedgerExists, id, rerr)
			default:
				lastErr = rerr
				select {
				case <-ctx.Done():
					return 0, &CreateUnknownError{id, ctoken, lastErr}
				case <-time.After(backoff):
				}
				backoff = min(backoff*2, time.Second)
				continue
			}
			break
		}
	}
}

// readMetadata reads and decodes a ledger's metadata.
func (c *Client) readMetadata(ctx context.Context, id int64) (*meta.LedgerMetadata, Version, error) {
	data, v, err := c.meta.ReadLedgerMetadata(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	md, err := meta.Unmarshal(data)
	if err != nil {
		return nil, 0, fmt.Errorf("ledger %d: %w", id, err)
	}
	return md, v, nil
}

// LedgerInfo is a ledger's metadata at one version.
type LedgerInfo struct {
	LedgerID int64
	Metadata *meta.LedgerMetadata
	Version  Version
}

// ReadLedgerMetadata returns a ledger's current metadata and version.
func (c *Client) ReadLedgerMetadata(ctx context.Context, id int64) (LedgerInfo, error) {
	md, v, err := c.readMetadata(ctx, id)
	if err != nil {
		return LedgerInfo{}, err
	}
	return LedgerInfo{LedgerID: id, Metadata: md, Version: v}, nil
}

// writeMetadataSettled CASes a ledger's metadata from expected to next and
// settles an unknown store answer by re-reading: if the stored bytes equal
// next, the write applied. It returns the new version, or ErrBadVersion
// with the current metadata when the znode moved.
func (c *Client) writeMetadataSettled(ctx context.Context, id int64, next *meta.LedgerMetadata, expected Version) (Version, *meta.LedgerMetadata, Version, error) {
	data, err := meta.Marshal(next)
	if err != nil {
		return 0, nil, 0, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	backoff := 50 * time.Millisecond
	for {
		v, err := c.meta.WriteLedgerMetadata(ctx, id, data, expected)
		if err == nil {
			return v, nil, 0, nil
		}
		if errors.Is(err, ErrNoSuchLedger) {
			return 0, nil, 0, err
		}
		for {
			cur, cv, rerr := c.meta.ReadLedgerMetadata(ctx, id)
			if rerr == nil {
				if bytes.Equal(cur, data) && cv != expected {
					return cv, nil, 0, nil // our write landed
				}
				if cv == expected {
					break // definitely not applied and nothing moved: retry the write
				}
				md, derr := meta.Unmarshal(cur)
				if derr != nil {
					return 0, nil, 0, fmt.Errorf("ledger %d: %w", id, derr)
				}
				return 0, md, cv, fmt.Errorf("%w: ledger %d moved from version %d to %d", ErrBadVersion, id, expected, cv)
			}
			if errors.Is(rerr, ErrNoSuchLedger) {
				return 0, nil, 0, rerr
			}
			select {
			case <-ctx.Done():
				return 0, nil, 0, fmt.Errorf("%w: metadata write of ledger %d: %v", ErrOutcomeUnknown, id, err)
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, time.Second)
		}
	}
}

// DeleteLedger deletes a ledger's metadata if it is still at expected (the
// version the caller last read). Bookies then reclaim the entries at their
// next garbage collection. The ID must never be used again.
//
// Outcomes: nil (applied, or the ledger was already gone after our own
// attempt), ErrBadVersion (conflict: re-read), ErrNoSuchLedger (nothing to
// delete), ErrOutcomeUnknown (could not settle before ctx ended).
func (c *Client) DeleteLedger(ctx context.Context, id int64, expected Version) error {
	if c.closed.Load() {
		return ErrClientClosed
	}
	backoff := 50 * time.Millisecond
	attempted := false
	for {
		err := c.meta.DeleteLedgerMetadata(ctx, id, expected)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrNoSuchLedger):
			if attempted {
				return nil // our earlier, unanswered delete applied
			}
			return err
		case errors.Is(err, ErrBadVersion):
			return err
		}
		attempted = true
		for {
			_, cv, rerr := c.meta.ReadLedgerMetadata(ctx, id)
			if errors.Is(rerr, ErrNoSuchLedger) {
				return nil
			}
			if rerr == nil {
				if cv != expected {
					return fmt.Errorf("%w: ledger %d moved from version %d to %d", ErrBadVersion, id, expected, cv)
				}
				break // still there at our version: retry the delete
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w: delete of ledger %d: %v", ErrOutcomeUnknown, id, err)
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, time.Second)
		}
	}
}

// OpenOptions configures OpenLedger and RecoverLedger.
type OpenOptions struct {
	// Password must equal the ledger's (BookKeeper refuses a mismatch).
	Password []byte
	// DigestType, if set, must equal the ledger's; zero accepts the stored one.
	DigestType proto.DigestType
}

func checkOpen(id int64, md *meta.LedgerMetadata, o OpenOptions) error {
	if !bytes.Equal(md.Password, o.Password) {
		return fmt.Errorf("%w: ledger %d password mismatch", ErrUnauthorized, id)
	}
	if o.DigestType != 0 && o.DigestType != md.DigestType {
		return fmt.Errorf("%w: ledger %d has digest %s, want %s", ErrInvalidArgument, id, md.DigestType, o.DigestType)
	}
	return nil
}
