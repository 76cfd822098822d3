package bookkeeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/nereusstream/nereus-go/bookkeeper/meta"
)

// ZKStore is the MetadataStore of a real BookKeeper cluster: ledger
// metadata znodes in BookKeeper's own layout and format under the ledgers
// root, and the bookie registry under <root>/available.
//
// It refuses roots without a LAYOUT record naming a hierarchical ledger
// manager: a client writing metadata where the bookies do not look would
// have every entry garbage-collected by them.
type ZKStore struct {
	conn     *zk.Conn
	ownsConn bool
	root     string
	layout   meta.Layout
	acl      []zk.ACL
}

// ZKOptions configures DialZK.
type ZKOptions struct {
	// LedgersRoot is the bookies' ledgers root; default "/ledgers".
	LedgersRoot string
	// SessionTimeout is the ZooKeeper session timeout; default 10s.
	SessionTimeout time.Duration
	// Logger receives the ZooKeeper library's connection chatter at debug
	// level; default slog.Default().
	Logger *slog.Logger
	// Digest, when set, is "user:password" for ZooKeeper digest
	// authentication of the session (re-sent on every reconnect). Znode
	// ACLs stay what the bookies also read (world), so bookie GC keeps
	// seeing every ledger. Never logged.
	Digest string
}

type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) { z.l.Debug(fmt.Sprintf(format, args...)) }

// DialZK connects to ZooKeeper (servers: a comma-separated connect string,
// e.g. "127.0.0.1:2181"), waits for a session, and checks the ledgers root.
func DialZK(ctx context.Context, servers string, opts ZKOptions) (*ZKStore, error) {
	if opts.LedgersRoot == "" {
		opts.LedgersRoot = meta.DefaultLedgersRoot
	}
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	hosts := strings.Split(servers, ",")
	conn, events, err := zk.Connect(hosts, opts.SessionTimeout, zk.WithLogger(zkLogger{opts.Logger}))
	if err != nil {
		return nil, fmt.Errorf("%w: connect %s: %v", ErrMetadataUnavailable, servers, err)
	}
	for connected := false; !connected; {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				connected = true
			}
		case <-ctx.Done():
			conn.Close()
			return nil, fmt.Errorf("%w: no ZooKeeper session with %s: %v", ErrMetadataUnavailable, servers, ctx.Err())
		}
	}
	if opts.Digest != "" {
		if err := conn.AddAuth("digest", []byte(opts.Digest)); err != nil {
			conn.Close()
			// The error names no credential.
			return nil, fmt.Errorf("%w: ZooKeeper digest authentication with %s failed: %v", ErrMetadataUnavailable, servers, err)
		}
	}
	// Drain session events: nothing here depends on them (every call
	// reports its own failure), and the library drops what nobody reads.
	go func() {
		for range events {
		}
	}()
	s, err := NewZKStore(ctx, conn, opts.LedgersRoot)
	if err != nil {
		conn.Close()
		return nil, err
	}
	s.ownsConn = true
	return s, nil
}

// NewZKStore uses an existing ZooKeeper connection (which the caller keeps
// owning) and checks the ledgers root's LAYOUT.
func NewZKStore(ctx context.Context, conn *zk.Conn, ledgersRoot string) (*ZKStore, error) {
	s := &ZKStore{conn: conn, root: strings.TrimSuffix(ledgersRoot, "/"), acl: zk.WorldACL(zk.PermAll)}
	data, _, err := zkCall(ctx, func() ([]byte, *zk.Stat, error) { return conn.Get(meta.LayoutPath(s.root)) })
	if errors.Is(err, zk.ErrNoNode) {
		return nil, fmt.Errorf("%w: no %s: not a BookKeeper ledgers root (bookies write it on first start)",
			ErrUnsupportedLayout, meta.LayoutPath(s.root))
	}
	if err != nil {
		return nil, mapZK(err)
	}
	if s.layout, err = meta.ParseLayout(data); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsupportedLayout, err)
	}
	return s, nil
}

// Conn returns the underlying ZooKeeper connection.
func (s *ZKStore) Conn() *zk.Conn { return s.conn }

// Root returns the ledgers root.
func (s *ZKStore) Root() string { return s.root }

// LedgerPath returns the znode path of a ledger.
func (s *ZKStore) LedgerPath(ledgerID int64) string {
	return meta.LedgerPath(s.root, s.layout, ledgerID)
}

// Close closes the connection if DialZK opened it.
func (s *ZKStore) Close() error {
	if s.ownsConn {
		s.conn.Close()
	}
	return nil
}

// zkCall runs a blocking ZooKeeper call and gives up waiting when ctx ends
// (the call's outcome is then unknown; the library bounds the call itself).
func zkCall[T any, U any](ctx context.Context, f func() (T, U, error)) (T, U, error) {
	type res struct {
		t   T
		u   U
		err error
	}
	ch := make(chan res, 1)
	go func() {
		t, u, err := f()
		ch <- res{t, u, err}
	}()
	select {
	case r := <-ch:
		return r.t, r.u, r.err
	case <-ctx.Done():
		var t T
		var u U
		return t, u, fmt.Errorf("%w: %v", ErrMetadataUnavailable, ctx.Err())
	}
}

// mapZK maps ZooKeeper errors onto the MetadataStore contract. Only the
// server's definite answers are definite; everything else (connection
// loss, session expiry, no server, closed client) is unavailable/unknown.
func mapZK(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrMetadataUnavailable):
		return err
	case errors.Is(err, zk.ErrNodeExists):
		return fmt.Errorf("%w (%v)", ErrLedgerExists, err)
	case errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("%w (%v)", ErrNoSuchLedger, err)
	case errors.Is(err, zk.ErrBadVersion):
		return fmt.Errorf("%w (%v)", ErrBadVersion, err)
	}
	return fmt.Errorf("%w: %v", ErrMetadataUnavailable, err)
}

// CreateLedgerMetadata creates the ledger znode PERSISTENT, creating missing
// parents (and retrying when a concurrent delete removed an empty parent).
func (s *ZKStore) CreateLedgerMetadata(ctx context.Context, ledgerID int64, data []byte) (Version, error) {
	p := s.LedgerPath(ledgerID)
	for attempt := 0; ; attempt++ {
		_, _, err := zkCall(ctx, func() (string, struct{}, error) {
			r, err := s.conn.Create(p, data, 0, s.acl)
			return r, struct{}{}, err
		})
		if errors.Is(err, zk.ErrNoNode) && attempt < 5 {
			if perr := s.createParents(ctx, path.Dir(p)); perr != nil {
				return 0, perr
			}
			continue
		}
		if err != nil {
			return 0, mapZK(err)
		}
		return 0, nil // a new znode's data version is 0
	}
}

func (s *ZKStore) createParents(ctx context.Context, dir string) error {
	rel := strings.TrimPrefix(dir, s.root)
	cur := s.root
	for _, part := range strings.Split(strings.Trim(rel, "/"), "/") {
		cur += "/" + part
		_, _, err := zkCall(ctx, func() (string, struct{}, error) {
			r, err := s.conn.Create(cur, nil, 0, s.acl)
			return r, struct{}{}, err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			// A failed parent create writes nothing the ledger depends on.
			return mapZK(err)
		}
	}
	return nil
}

// ReadLedgerMetadata syncs the connection's server with the leader and
// reads the znode, so the read observes every write that completed before
// it started.
func (s *ZKStore) ReadLedgerMetadata(ctx context.Context, ledgerID int64) ([]byte, Version, error) {
	if _, _, err := zkCall(ctx, func() (string, struct{}, error) {
		r, err := s.conn.Sync(s.root)
		return r, struct{}{}, err
	}); err != nil {
		return nil, 0, mapZK(err)
	}
	data, st, err := zkCall(ctx, func() ([]byte, *zk.Stat, error) { return s.conn.Get(s.LedgerPath(ledgerID)) })
	if err != nil {
		return nil, 0, mapZK(err)
	}
	return data, Version(st.Version), nil
}

// WriteLedgerMetadata is setData with the expected version.
func (s *ZKStore) WriteLedgerMetadata(ctx context.Context, ledgerID int64, data []byte, expected Version) (Version, error) {
	if expected < 0 || expected > 1<<31-1 {
		return 0, fmt.Errorf("%w: version %d", ErrInvalidArgument, expected)
	}
	st, _, err := zkCall(ctx, func() (*zk.Stat, struct{}, error) {
		st, err := s.conn.Set(s.LedgerPath(ledgerID), data, int32(expected))
		return st, struct{}{}, err
	})
	if err != nil {
		return 0, mapZK(err)
	}
	return Version(st.Version), nil
}

// DeleteLedgerMetadata deletes the znode at the expected version, then
// removes parents left empty (as BookKeeper does), never the root.
func (s *ZKStore) DeleteLedgerMetadata(ctx context.Context, ledgerID int64, expected Version) error {
	if expected < 0 || expected > 1<<31-1 {
		return fmt.Errorf("%w: version %d", ErrInvalidArgument, expected)
	}
	p := s.LedgerPath(ledgerID)
	_, _, err := zkCall(ctx, func() (struct{}, struct{}, error) {
		return struct{}{}, struct{}{}, s.conn.Delete(p, int32(expected))
	})
	if err != nil {
		return mapZK(err)
	}
	// Best effort: a non-empty or vanished parent ends the walk; a create
	// racing this recreates what it needs.
	for dir := path.Dir(p); dir != s.root && strings.HasPrefix(dir, s.root+"/"); dir = path.Dir(dir) {
		_, _, err := zkCall(ctx, func() (struct{}, struct{}, error) {
			return struct{}{}, struct{}{}, s.conn.Delete(dir, -1)
		})
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			break
		}
	}
	return nil
}

// WritableBookies lists <root>/available minus "readonly", resolving each
// registration's "bookie-rpc" endpoint.
func (s *ZKStore) WritableBookies(ctx context.Context) ([]BookieInfo, error) {
	ids, _, err := zkCall(ctx, func() ([]string, *zk.Stat, error) { return s.conn.Children(meta.AvailablePath(s.root)) })
	if err != nil {
		return nil, mapZK(err)
	}
	out := make([]BookieInfo, 0, len(ids))
	for _, id := range ids {
		if id == "readonly" {
			continue
		}
		data, _, err := zkCall(ctx, func() ([]byte, *zk.Stat, error) {
			return s.conn.Get(meta.AvailablePath(s.root) + "/" + id)
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // unregistered meanwhile
		}
		if err != nil {
			return nil, mapZK(err)
		}
		out = append(out, BookieInfo{ID: id, Addr: addrFromRegistration(id, data)})
	}
	return out, nil
}

// ResolveBookie reads the bookie's registration (writable, then
// read-only); an unregistered ID resolves to itself if it is host:port.
func (s *ZKStore) ResolveBookie(ctx context.Context, bookieID string) (string, error) {
	for _, dir := range []string{meta.AvailablePath(s.root), meta.ReadOnlyPath(s.root)} {
		data, _, err := zkCall(ctx, func() ([]byte, *zk.Stat, error) { return s.conn.Get(dir + "/" + bookieID) })
		if err == nil {
			return addrFromRegistration(bookieID, data), nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return "", mapZK(err)
		}
	}
	if _, port, err := net.SplitHostPort(bookieID); err == nil {
		if _, err := strconv.Atoi(port); err == nil {
			return bookieID, nil
		}
	}
	return "", fmt.Errorf("%w: bookie %q is not registered and is not host:port", ErrBookieUnavailable, bookieID)
}

func addrFromRegistration(id string, data []byte) string {
	if eps, err := meta.ParseBookieServiceInfo(data); err == nil {
		for _, ep := range eps {
			if ep.Protocol == "bookie-rpc" && ep.Host != "" && ep.Port > 0 {
				return net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port)))
			}
		}
	}
	return id // legacy registrations carry no data: the ID is host:port
}

// InstanceID returns the cluster's <root>/INSTANCEID (written by
// "bookkeeper shell initnewcluster"; a UUID naming this BookKeeper cluster).
func (s *ZKStore) InstanceID(ctx context.Context) (string, error) {
	data, _, err := zkCall(ctx, func() ([]byte, *zk.Stat, error) { return s.conn.Get(s.root + "/INSTANCEID") })
	if errors.Is(err, zk.ErrNoNode) {
		return "", fmt.Errorf("%w: %s/INSTANCEID missing (cluster not initialised with initnewcluster)", ErrNoSuchLedger, s.root)
	}
	if err != nil {
		return "", mapZK(err)
	}
	return strings.TrimSpace(string(data)), nil
}

// auxPath maps a marker name to <root>/<dir>/<name>. dir must not look like
// a BookKeeper node: non-numeric, so ledger iteration and GC skip it.
func (s *ZKStore) auxPath(dir, name string) (string, error) {
	valid := func(x string) bool {
		if x == "" || strings.ContainsAny(x, "/\x00") || x == "." || x == ".." {
			return false
		}
		for _, c := range x {
			if c < '0' || c > '9' {
				return true
			}
		}
		return false // all digits: looks like a ledger parent node
	}
	if !valid(dir) || !valid(name) {
		return "", fmt.Errorf("%w: marker %q/%q", ErrInvalidArgument, dir, name)
	}
	switch dir {
	case "available", "cookies", "LAYOUT", "INSTANCEID", "underreplication", "idgen", "idgen-long":
		return "", fmt.Errorf("%w: %q is a BookKeeper node", ErrInvalidArgument, dir)
	}
	return s.root + "/" + dir + "/" + name, nil
}

// CreateMarker creates <root>/<dir>/<name> (PERSISTENT) with data if it
// does not exist. ErrLedgerExists: it exists (nothing written); an
// ErrMetadataUnavailable error: outcome unknown (read it back).
func (s *ZKStore) CreateMarker(ctx context.Context, dir, name string, data []byte) error {
	p, err := s.auxPath(dir, name)
	if err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		_, _, err := zkCall(ctx, func() (string, struct{}, error) {
			r, err := s.conn.Create(p, data, 0, s.acl)
			return r, struct{}{}, err
		})
		if errors.Is(err, zk.ErrNoNode) && attempt < 3 {
			if perr := s.createParents(ctx, path.Dir(p)); perr != nil {
				return perr
			}
			continue
		}
		return mapZK(err)
	}
}

// ReadMarker reads <root>/<dir>/<name> after a sync (linearizable).
// ErrNoSuchLedger: it does not exist.
func (s *ZKStore) ReadMarker(ctx context.Context, dir, name string) ([]byte, error) {
	p, err := s.auxPath(dir, name)
	if err != nil {
		return nil, err
	}
	if _, _, err := zkCall(ctx, func() (string, struct{}, error) {
		r, err := s.conn.Sync(s.root)
		return r, struct{}{}, err
	}); err != nil {
		return nil, mapZK(err)
	}
	data, _, err := zkCall(ctx, func() ([]byte, *zk.Stat, error) { return s.conn.Get(p) })
	if err != nil {
		return nil, mapZK(err)
	}
	return data, nil
}

// DeleteMarker deletes <root>/<dir>/<name> unconditionally (tests and
// operators; Nereus never deletes its namespace marker).
func (s *ZKStore) DeleteMarker(ctx context.Context, dir, name string) error {
	p, err := s.auxPath(dir, name)
	if err != nil {
		return err
	}
	_, _, err = zkCall(ctx, func() (struct{}, struct{}, error) { return struct{}{}, struct{}{}, s.conn.Delete(p, -1) })
	return mapZK(err)
}

// WriteMarker overwrites an existing marker (tests: forging a foreign one).
func (s *ZKStore) WriteMarker(ctx context.Context, dir, name string, data []byte) error {
	p, err := s.auxPath(dir, name)
	if err != nil {
		return err
	}
	_, _, err = zkCall(ctx, func() (*zk.Stat, struct{}, error) {
		st, err := s.conn.Set(p, data, -1)
		return st, struct{}{}, err
	})
	return mapZK(err)
}
