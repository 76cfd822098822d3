package bookkeeper

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper/proto"
)

// A bookieConn is one v2 TCP connection to one bookie.
//
// Correlation. v2 has no request IDs: the bookie echoes (op, ledgerId,
// entryId), and responses to different requests may come back in any order
// (reads run on thread pools). So the connection keeps, per key, a FIFO of
// requests of which only the head is on the wire: two requests with the
// same key are never in flight together, and every response matches exactly
// one request.
//
// Failure. Any I/O error, malformed response, unmatched response or request
// timeout closes the connection and fails every request on it with
// ErrBookieUnavailable. A timeout closes the connection too, because a late
// answer to a timed-out request could otherwise be matched to the next
// request with the same key. The outcome of a failed add is therefore
// "maybe stored on that bookie"; callers only ever resend identical bytes.
//
// Lifecycle. The connection dials lazily on its own goroutine and never
// calls back synchronously. Requests queued before the dial completes are
// written after it, in order.
//
// Writing. Frames are written by whoever holds wmu: a sender that finds the
// socket idle writes its frame (and anything queued) on its own goroutine,
// saving a goroutine hand-off per request; otherwise the frame is queued and
// the write loop is woken. A sender that fails to take wmu always wakes the
// write loop, so nothing queued is left behind. Direct writes are only ever
// done by callers that hold no client lock (a socket write may block), never
// by the read loop (which must keep draining responses).
type bookieConn struct {
	pool   *connPool
	bookie string
	wmu    sync.Mutex // held while writing to the socket

	mu      sync.Mutex
	nc      net.Conn
	closed  bool
	err     error
	waiting map[reqKey][]*bookieRequest // head of each FIFO is on the wire (or queued to be)
	sendq   [][]byte
	wake    chan struct{}
	done    chan struct{}
}

type reqKey struct {
	op     uint8
	ledger int64
	entry  int64
}

// bookieRequest is one request. cb is called exactly once, never while a
// connection lock is held, from a connection goroutine or a timer.
type bookieRequest struct {
	key     reqKey
	frame   []byte
	timeout time.Duration
	cb      func(resp proto.Response, err error)
	timer   *time.Timer
}

type connPool struct {
	c  *Client
	mu sync.Mutex
	// conns holds the live connection per bookie ID.
	conns map[string]*bookieConn
	// downUntil rate-limits dials to a bookie that just failed one.
	downUntil map[string]time.Time
	closed    bool
}

func newConnPool(c *Client) *connPool {
	return &connPool{c: c, conns: map[string]*bookieConn{}, downUntil: map[string]time.Time{}}
}

// send queues a request to a bookie. It returns an error (and does not call
// cb) when the request cannot be queued: the pool is closed or the bookie
// failed a dial within the back-off window. Otherwise cb is called later.
// With direct, the caller may write the frame itself (it must hold no lock
// a bookie callback takes).
func (p *connPool) send(bookie string, r *bookieRequest, direct bool) error {
	for i := 0; ; i++ {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return ErrClientClosed
		}
		bc := p.conns[bookie]
		if bc == nil {
			if until, ok := p.downUntil[bookie]; ok && time.Now().Before(until) {
				p.mu.Unlock()
				return fmt.Errorf("%w: %s: recent connection failure", ErrBookieUnavailable, bookie)
			}
			bc = &bookieConn{pool: p, bookie: bookie, waiting: map[reqKey][]*bookieRequest{},
				wake: make(chan struct{}, 1), done: make(chan struct{})}
			p.conns[bookie] = bc
			go bc.run()
		}
		p.mu.Unlock()
		if bc.enqueue(r, direct) {
			return nil
		}
		if i > 3 {
			return fmt.Errorf("%w: %s: connection keeps closing", ErrBookieUnavailable, bookie)
		}
	}
}

// forget removes a failed connection so the next send dials anew.
func (p *connPool) forget(bc *bookieConn, dialFailed bool) {
	p.mu.Lock()
	if p.conns[bc.bookie] == bc {
		delete(p.conns, bc.bookie)
	}
	if dialFailed {
		p.downUntil[bc.bookie] = time.Now().Add(p.c.cfg.ReconnectBackoff)
	} else {
		delete(p.downUntil, bc.bookie)
	}
	p.mu.Unlock()
}

func (p *connPool) close() {
	p.mu.Lock()
	p.closed = true
	conns := make([]*bookieConn, 0, len(p.conns))
	for _, bc := range p.conns {
		conns = append(conns, bc)
	}
	p.mu.Unlock()
	for _, bc := range conns {
		bc.fail(ErrClientClosed, false)
	}
}

// closeBookie drops the connection to one bookie (tests and fault handling).
func (p *connPool) closeBookie(bookie string) {
	p.mu.Lock()
	bc := p.conns[bookie]
	p.mu.Unlock()
	if bc != nil {
		bc.fail(fmt.Errorf("%w: %s: connection closed by client", ErrBookieUnavailable, bookie), false)
	}
}

// enqueue adds r; false means the connection is already closed.
func (bc *bookieConn) enqueue(r *bookieRequest, direct bool) bool {
	bc.mu.Lock()
	if bc.closed {
		bc.mu.Unlock()
		return false
	}
	q := bc.waiting[r.key]
	bc.waiting[r.key] = append(q, r)
	r.timer = time.AfterFunc(r.timeout, func() {
		bc.fail(fmt.Errorf("%w: %s: request timed out after %v", ErrBookieUnavailable, bc.bookie, r.timeout), false)
	})
	head := len(q) == 0
	if head {
		bc.sendq = append(bc.sendq, r.frame)
	}
	connected := bc.nc != nil
	bc.mu.Unlock()
	if head {
		if direct && connected && bc.wmu.TryLock() {
			bc.writeQueued()
			bc.wmu.Unlock()
		} else {
			bc.wakeWriter()
		}
	}
	return true
}

func (bc *bookieConn) wakeWriter() {
	select {
	case bc.wake <- struct{}{}:
	default:
	}
}

// writeQueued writes everything queued; the caller holds wmu.
func (bc *bookieConn) writeQueued() {
	var batch net.Buffers
	for {
		bc.mu.Lock()
		if bc.closed || len(bc.sendq) == 0 || bc.nc == nil {
			bc.mu.Unlock()
			return
		}
		batch = append(batch[:0], bc.sendq...)
		clear(bc.sendq)
		bc.sendq = bc.sendq[:0]
		nc := bc.nc
		bc.mu.Unlock()
		// WriteTo consumes the slice header it is given; keep batch's backing array.
		b := batch
		if _, err := b.WriteTo(nc); err != nil {
			bc.fail(fmt.Errorf("%w: %s: write: %v", ErrBookieUnavailable, bc.bookie, err), false)
			return
		}
		clear(batch)
	}
}

func (bc *bookieConn) run() {
	cfg := &bc.pool.c.cfg
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ConnectTimeout)
	addr, err := bc.pool.c.meta.ResolveBookie(ctx, bc.bookie)
	if err == nil {
		var d net.Dialer
		var nc net.Conn
		nc, err = d.DialContext(ctx, "tcp", addr)
		if err == nil {
			bc.mu.Lock()
			if bc.closed {
				bc.mu.Unlock()
				nc.Close()
				cancel()
				return
			}
			bc.nc = nc
			bc.mu.Unlock()
		}
	}
	cancel()
	if err != nil {
		bc.fail(fmt.Errorf("%w: %s: connect: %v", ErrBookieUnavailable, bc.bookie, err), true)
		return
	}
	go bc.readLoop()
	bc.writeLoop()
}

func (bc *bookieConn) writeLoop() {
	for {
		select {
		case <-bc.wake:
		case <-bc.done:
			return
		}
		bc.wmu.Lock()
		bc.writeQueued()
		bc.wmu.Unlock()
	}
}

func (bc *bookieConn) readLoop() {
	br := bufio.NewReaderSize(bc.nc, 64<<10)
	maxFrame := bc.pool.c.cfg.MaxFrameSize + proto.ResponseHeaderLen
	for {
		// A fresh buffer per frame: read bodies are handed to callers.
		frame, err := proto.ReadFrame(br, nil, maxFrame)
		if err != nil {
			bc.fail(fmt.Errorf("%w: %s: read: %v", ErrBookieUnavailable, bc.bookie, err), false)
			return
		}
		resp, err := proto.ParseResponse(frame)
		if err != nil {
			bc.fail(fmt.Errorf("%w: %s: %v", ErrBookieUnavailable, bc.bookie, err), false)
			return
		}
		key := reqKey{op: resp.Op, ledger: resp.LedgerID, entry: resp.EntryID}
		bc.mu.Lock()
		q := bc.waiting[key]
		if len(q) == 0 {
			bc.mu.Unlock()
			bc.fail(fmt.Errorf("%w: %s: response to no request (op %d ledger %d entry %d)",
				ErrBookieUnavailable, bc.bookie, resp.Op, resp.LedgerID, resp.EntryID), false)
			return
		}
		r := q[0]
		q[0] = nil
		if len(q) == 1 {
			delete(bc.waiting, key)
		} else {
			bc.waiting[key] = q[1:]
			bc.sendq = append(bc.sendq, q[1].frame)
			bc.wakeWriter()
		}
		r.timer.Stop()
		bc.mu.Unlock()
		r.cb(resp, nil)
	}
}

// fail closes the connection and fails every request on it, once.
func (bc *bookieConn) fail(err error, dialFailed bool) {
	bc.mu.Lock()
	if bc.closed {
		bc.mu.Unlock()
		return
	}
	bc.closed = true
	bc.err = err
	if bc.nc != nil {
		bc.nc.Close()
	}
	close(bc.done)
	var reqs []*bookieRequest
	for _, q := range bc.waiting {
		reqs = append(reqs, q...)
	}
	bc.waiting = nil
	bc.sendq = nil
	bc.mu.Unlock()
	bc.pool.forget(bc, dialFailed)
	for _, r := range reqs {
		r.timer.Stop()
		r.cb(proto.Response{}, err)
	}
}
