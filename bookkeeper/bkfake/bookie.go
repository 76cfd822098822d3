package bkfake

import (
	"bufio"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/nereusstream/nereus-go/bookkeeper/proto"
)

// Action tells a Bookie what to do with one request (see SetIntercept).
// The zero Action processes the request normally.
type Action struct {
	// Drop: never answer (and do not apply) the request.
	Drop bool
	// DropAfterApply: apply the request but never answer it.
	DropAfterApply bool
	// Delay: wait this long before applying and answering; answers to
	// other requests on the connection may overtake it.
	Delay time.Duration
	// RC: answer with this return code without applying (0: normal).
	RC proto.RC
	// Corrupt: flip the last byte of a READ answer's entry.
	Corrupt bool
	// CloseConn: close the connection instead of answering.
	CloseConn bool
}

type fakeLedger struct {
	key     [proto.MasterKeyLen]byte
	fenced  bool
	entries map[int64][]byte
}

// Bookie is a fake bookie listening on 127.0.0.1.
type Bookie struct {
	ln   net.Listener
	addr string

	mu        sync.Mutex
	ledgers   map[int64]*fakeLedger
	conns     map[net.Conn]struct{}
	down      bool
	intercept func(proto.Request) Action
	adds      int
	reads     int
	wg        sync.WaitGroup
}

// NewBookie starts a fake bookie on a free loopback port.
func NewBookie() (*Bookie, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Bookie{ln: ln, addr: ln.Addr().String(), ledgers: map[int64]*fakeLedger{}, conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

// ID is the bookie ID (and address): "127.0.0.1:port".
func (b *Bookie) ID() string { return b.addr }

// SetIntercept installs a function consulted for every request (nil: none).
// It runs on the connection's goroutine and must not block.
func (b *Bookie) SetIntercept(f func(proto.Request) Action) {
	b.mu.Lock()
	b.intercept = f
	b.mu.Unlock()
}

// Kill drops every connection and refuses new ones (they are closed at
// once) until Restart. Stored entries and fencing survive, as they would in
// a real bookie's journal.
func (b *Bookie) Kill() {
	b.mu.Lock()
	b.down = true
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
}

// Restart undoes Kill.
func (b *Bookie) Restart() {
	b.mu.Lock()
	b.down = false
	b.mu.Unlock()
}

// Close stops the bookie for good.
func (b *Bookie) Close() {
	b.ln.Close()
	b.Kill()
	b.wg.Wait()
}

// Entry returns the stored bytes of an entry.
func (b *Bookie) Entry(ledgerID, entryID int64) ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.ledgers[ledgerID]
	if l == nil {
		return nil, false
	}
	e, ok := l.entries[entryID]
	return append([]byte(nil), e...), ok
}

// EntryIDs returns the stored entry IDs of a ledger, sorted.
func (b *Bookie) EntryIDs(ledgerID int64) []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.ledgers[ledgerID]
	if l == nil {
		return nil
	}
	ids := make([]int64, 0, len(l.entries))
	for id := range l.entries {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// HasLedger reports whether the bookie knows the ledger (an add or a
// fencing read creates it).
func (b *Bookie) HasLedger(ledgerID int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ledgers[ledgerID] != nil
}

// Fenced reports whether the ledger is fenced on this bookie.
func (b *Bookie) Fenced(ledgerID int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.ledgers[ledgerID]
	return l != nil && l.fenced
}

// Counts returns the number of ADD and READ requests received.
func (b *Bookie) Counts() (adds, reads int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.adds, b.reads
}

func (b *Bookie) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		if b.down {
			b.mu.Unlock()
			c.Close()
			continue
		}
		b.conns[c] = struct{}{}
		b.mu.Unlock()
		b.wg.Add(1)
		go b.serve(c)
	}
}

type fakeConn struct {
	c  net.Conn
	mu sync.Mutex // serialises response writes
}

func (fc *fakeConn) write(frame []byte) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	_, _ = fc.c.Write(frame)
}

func (b *Bookie) serve(c net.Conn) {
	defer b.wg.Done()
	defer func() {
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
		c.Close()
	}()
	fc := &fakeConn{c: c}
	br := bufio.NewReader(c)
	var pending sync.WaitGroup
	defer pending.Wait()
	for {
		frame, err := proto.ReadFrame(br, nil, proto.DefaultMaxFrameSize)
		if err != nil {
			return
		}
		req, err := proto.ParseRequest(frame)
		if err != nil {
			return // a real bookie closes on undecodable input too
		}
		b.mu.Lock()
		f := b.intercept
		if req.Op == proto.OpAdd {
			b.adds++
		} else {
			b.reads++
		}
		b.mu.Unlock()
		var act Action
		if f != nil {
			act = f(req)
		}
		if act.CloseConn {
			return
		}
		if act.Drop {
			continue
		}
		if act.Delay > 0 {
			pending.Add(1)
			go func() {
				defer pending.Done()
				time.Sleep(act.Delay)
				b.answer(fc, req, act)
			}()
			continue
		}
		b.answer(fc, req, act)
	}
}

func (b *Bookie) answer(fc *fakeConn, req proto.Request, act Action) {
	var rc proto.RC
	var body []byte
	if act.RC != 0 {
		rc = act.RC
	} else {
		rc, body = b.apply(req)
	}
	if act.DropAfterApply {
		return
	}
	if act.Corrupt && len(body) > 0 {
		body = append([]byte(nil), body...)
		body[len(body)-1] ^= 0xff
	}
	fc.write(proto.AppendResponse(nil, req.Version, req.Op, rc, req.LedgerID, req.EntryID, body))
}

// apply implements the bookie's semantics (BookieImpl, HandleFactoryImpl,
// ReadEntryProcessor) for one request.
func (b *Bookie) apply(req proto.Request) (proto.RC, []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.ledgers[req.LedgerID]
	switch req.Op {
	case proto.OpAdd:
		if l == nil {
			l = &fakeLedger{key: req.MasterKey, entries: map[int64][]byte{}}
			b.ledgers[req.LedgerID] = l
		} else if l.key != req.MasterKey {
			return proto.EUA, nil
		}
		if l.fenced && req.Flags&proto.FlagRecoveryAdd == 0 {
			return proto.EFENCED, nil
		}
		l.entries[req.EntryID] = append([]byte(nil), req.Entry...)
		return proto.EOK, nil
	case proto.OpRead:
		if req.Flags&proto.FlagDoFencing != 0 {
			if !req.HasKey {
				return proto.EUA, nil
			}
			if l == nil {
				l = &fakeLedger{key: req.MasterKey, entries: map[int64][]byte{}}
				b.ledgers[req.LedgerID] = l
			} else if l.key != req.MasterKey {
				return proto.EUA, nil
			}
			l.fenced = true
		}
		if l == nil {
			return proto.ENOLEDGER, nil
		}
		id := req.EntryID
		if id == proto.LastEntry {
			id = -1
			for e := range l.entries {
				id = max(id, e)
			}
			if id < 0 {
				return proto.ENOENTRY, nil
			}
		}
		e, ok := l.entries[id]
		if !ok {
			return proto.ENOENTRY, nil
		}
		return proto.EOK, append([]byte(nil), e...)
	}
	return proto.EBADREQ, nil
}
