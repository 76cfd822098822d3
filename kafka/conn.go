package kafka

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/listener"
)

// A connection runs two goroutines:
//
//   - the reader reads one frame at a time, parses its header, checks the
//     API key and version against the registry BEFORE decoding the body,
//     decodes it with kmsg and runs the handler's synchronous part. Running
//     every handler's synchronous part in read order is what keeps
//     side effects ordered per connection (two produces to one partition on
//     one connection append in the order they were sent).
//   - the writer takes answer slots in read order, waits for each slot's
//     response (a handler may finish asynchronously: a produce waiting for
//     its commits, a fetch long poll, a join waiting for the rebalance) and
//     writes it. Responses therefore leave in request order while the work
//     behind them overlaps (pipelining).
//
// acks=0 produces have no slot at all, so they never hold up later
// responses. The slot queue is bounded (MaxInFlightPerConn): when it is full
// the reader stops reading, which is the connection's backpressure.
type conn struct {
	s  *Server
	nc net.Conn
	// ln is the listener the connection arrived on: its name and
	// advertised address are what Metadata and FindCoordinator answer.
	ln     *listener.Bound
	remote string
	host   string // the client's IP, for ACL host matching
	auth   connAuth
	ctx    context.Context
	cancel context.CancelFunc
	queue  chan *slot

	closeOnce sync.Once
	// throttledUntil (unix nanos) pauses reading while a quota throttles
	// the client (quota.go).
	throttledUntil atomic.Int64
}

// slot is one response position in the connection's output order.
type slot struct {
	key     int16
	version int16 // version to encode the response at
	corrID  int32
	start   time.Time
	done    chan struct{}
	resp    kmsg.Response
}

func newConn(s *Server, nc net.Conn, ln *listener.Bound) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	return &conn{s: s, nc: nc, ln: ln, remote: nc.RemoteAddr().String(), host: hostOf(nc), ctx: ctx, cancel: cancel,
		queue: make(chan *slot, s.cfg.MaxInFlightPerConn)}
}

func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.cancel()
		_ = c.nc.Close()
	})
}

// stopReading makes the reader stop at the next frame boundary (graceful
// shutdown); answers already owed are still written.
func (c *conn) stopReading() { _ = c.nc.SetReadDeadline(time.Now()) }

func (c *conn) serve() {
	if err := listener.Handshake(c.nc, 0); err != nil {
		c.s.log.Debug("kafka: TLS handshake failed", "remote", c.remote, "listener", c.ln.Spec().ID(), "err", err)
		c.close()
		return
	}
	c.initAuth()
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	err := c.readLoop()
	close(c.queue)
	if err != nil {
		c.close() // abort: do not wait to write owed responses
	}
	<-writerDone
	c.close()
}

// protocolError is bad input from the client: the connection is closed
// with a log line and the server goes on.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return e.msg }

// authClose closes a connection the authentication state does not admit
// the request of (Kafka closes those too, without an answer).
type authClose struct{ why string }

func (e *authClose) Error() string { return e.why }

func badInput(format string, args ...any) error {
	return &protocolError{msg: fmt.Sprintf(format, args...)}
}

func (c *conn) readLoop() error {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var sizeBuf [4]byte
	for {
		c.waitThrottle()
		if _, err := io.ReadFull(br, sizeBuf[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return nil // connection reset: nothing to log
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		if c.auth.state == saslRawAuthenticate {
			// SaslHandshake v0: the next frames are bare SASL tokens.
			if size < 0 || size > maxUnauthenticatedFrame {
				return c.fail(&authClose{why: fmt.Sprintf("SASL token of %d bytes", size)})
			}
			buf := make([]byte, size)
			if _, err := io.ReadFull(br, buf); err != nil {
				return nil
			}
			if err := c.handleRawSASL(buf); err != nil {
				return c.fail(err)
			}
			if c.auth.closeAfter {
				return nil
			}
			continue
		}
		if size < 10 || size > c.s.cfg.MaxRequestBytes {
			return c.fail(badInput("frame size %d outside [10, %d]", size, c.s.cfg.MaxRequestBytes))
		}
		if (c.auth.state == saslHandshake || c.auth.state == saslAuthenticate) && size > maxUnauthenticatedFrame {
			// Kafka's sasl.server.max.receive.size: nobody unauthenticated
			// makes the broker allocate a large buffer.
			return c.fail(&authClose{why: fmt.Sprintf("frame of %d bytes before SASL authentication (limit %d)", size, maxUnauthenticatedFrame)})
		}
		// Peek the API key so non-produce frames are held to the smaller
		// bound before we allocate for them.
		head, err := br.Peek(2)
		if err != nil {
			return c.fail(badInput("truncated frame: %v", err))
		}
		if key := int16(binary.BigEndian.Uint16(head)); key != 0 && size > c.s.cfg.MaxOtherRequestBytes {
			return c.fail(badInput("frame size %d for api key %d exceeds %d", size, key, c.s.cfg.MaxOtherRequestBytes))
		}
		buf := make([]byte, size)
		if _, err := io.ReadFull(br, buf); err != nil {
			return c.fail(badInput("truncated frame: read %v", err))
		}
		c.s.stats.BytesIn.Add(int64(size) + 4)
		if err := c.handleFrame(buf); err != nil {
			return c.fail(err)
		}
		if c.auth.closeAfter {
			return nil // the answer already queued is written, then close
		}
	}
}

func (c *conn) fail(err error) error {
	var pe *protocolError
	var ae *authClose
	if errors.As(err, &ae) {
		c.s.log.Info("kafka: closing connection", "remote", c.remote, "principal", c.auth.principal, "reason", ae.why)
	} else if errors.As(err, &pe) {
		c.s.stats.ProtocolErrors.Add(1)
		c.s.log.Warn("kafka: closing connection on bad request", "remote", c.remote, "err", err)
	} else {
		c.s.log.Warn("kafka: closing connection", "remote", c.remote, "err", err)
	}
	return err
}

// header is a parsed request header (v1 or v2).
type header struct {
	key, version int16
	corrID       int32
	clientID     string
}

// parseHeader reads key, version, correlation id and the nullable client
// id, which stays a classic int16-length string even in flexible (v2)
// headers. It returns the rest of the frame.
func parseHeader(b []byte) (header, []byte, error) {
	var h header
	if len(b) < 10 {
		return h, nil, badInput("request header truncated (%d bytes)", len(b))
	}
	h.key = int16(binary.BigEndian.Uint16(b[0:]))
	h.version = int16(binary.BigEndian.Uint16(b[2:]))
	h.corrID = int32(binary.BigEndian.Uint32(b[4:]))
	l := int16(binary.BigEndian.Uint16(b[8:]))
	b = b[10:]
	if l >= 0 {
		if int(l) > len(b) {
			return h, nil, badInput("client id length %d exceeds frame", l)
		}
		h.clientID = string(b[:l])
		b = b[l:]
	} else if l != -1 {
		return h, nil, badInput("client id length %d", l)
	}
	return h, b, nil
}

// skipTags skips a tagged-field section (uvarint count, then per field
// uvarint tag, uvarint size, bytes).
func skipTags(b []byte) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, badInput("bad tagged fields count")
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		_, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, badInput("bad tag")
		}
		b = b[k:]
		sz, k := binary.Uvarint(b)
		if k <= 0 || sz > uint64(len(b)-k) {
			return nil, badInput("bad tag size")
		}
		b = b[k+int(sz):]
	}
	return b, nil
}

// decodeRequest turns a frame into a request, enforcing the registry before
// the body is decoded. It returns (nil, h, nil) for the KIP-511 case (an
// ApiVersions version we do not know: answer v0 without parsing).
func decodeRequest(frame []byte) (kmsg.Request, header, error) {
	h, rest, err := parseHeader(frame)
	if err != nil {
		return nil, h, err
	}
	a := lookupAPI(h.key)
	if a == nil {
		return nil, h, badInput("unsupported api key %d", h.key)
	}
	if h.version < a.min || h.version > a.max {
		if h.key == kmsg.ApiVersions.Int16() && h.version > a.max {
			return nil, h, nil
		}
		return nil, h, badInput("unsupported version %d of api key %d (supported %d-%d)", h.version, h.key, a.min, a.max)
	}
	req := kmsg.RequestForKey(h.key)
	if req == nil {
		return nil, h, badInput("api key %d unknown to the codec", h.key)
	}
	req.SetVersion(h.version)
	if req.IsFlexible() {
		if rest, err = skipTags(rest); err != nil {
			return nil, h, err
		}
	}
	if h.key == kmsg.Produce.Int16() {
		if err := precheckProduce(rest, req.IsFlexible(), h.version); err != nil {
			return nil, h, err
		}
	}
	if err := req.ReadFrom(rest); err != nil {
		return nil, h, badInput("decode %s v%d: %v", kmsg.NameForKey(h.key), h.version, err)
	}
	return req, h, nil
}

func (c *conn) handleFrame(frame []byte) error {
	start := time.Now()
	req, h, err := decodeRequest(frame)
	if err != nil {
		return err
	}
	if ok, why := c.gate(h.key, c.s.cfg.Now()); !ok {
		return &authClose{why: fmt.Sprintf("%s (api key %d)", why, h.key)}
	}
	c.s.stats.Requests.Add(1)
	sl := &slot{key: h.key, version: h.version, corrID: h.corrID, start: start, done: make(chan struct{})}
	if req == nil { // KIP-511: unknown ApiVersions version
		sl.version = 0
		sl.resp = apiVersionsFallback()
		close(sl.done)
		return c.enqueue(sl)
	}
	r := &request{s: c.s, c: c, ctx: c.ctx, hdr: h, kreq: req}
	a := lookupAPI(h.key)
	var resp kmsg.Response
	var wait func() kmsg.Response
	dec := c.authorize(r)
	switch {
	case dec != nil && dec.refuse:
		return &authClose{why: fmt.Sprintf("%s is not authorized for api key %d", c.auth.principal, h.key)}
	case dec != nil && dec.deny != nil:
		resp = dec.deny
	case dec != nil && dec.empty:
		resp = req.ResponseKind()
		resp.SetVersion(h.version)
		if dec.patch != nil {
			dec.patch(resp)
		}
	default:
		if resp, wait, err = a.handle(r); err != nil {
			return err
		}
		if dec != nil && dec.patch != nil {
			switch {
			case resp != nil:
				dec.patch(resp)
			case wait != nil:
				inner, patch := wait, dec.patch
				wait = func() kmsg.Response {
					out := inner()
					if out != nil {
						patch(out)
					}
					return out
				}
			}
		}
	}
	if dec != nil && dec.closeConn && resp == nil && wait == nil {
		return &authClose{why: fmt.Sprintf("acks=0 produce by %s to a topic it may not write to", c.auth.principal)}
	}
	if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
		resp, wait = nil, nil // acks=0 has no answer, even a refusal
		if dec != nil && dec.closeConn {
			return &authClose{why: fmt.Sprintf("acks=0 produce by %s to a topic it may not write to", c.auth.principal)}
		}
	}
	switch {
	case resp != nil:
		sl.resp = resp
		close(sl.done)
	case wait != nil:
		go func() {
			sl.resp = wait()
			close(sl.done)
		}()
	default:
		return nil // no response (acks=0)
	}
	return c.enqueue(sl)
}

func (c *conn) enqueue(sl *slot) error {
	select {
	case c.queue <- sl:
		return nil
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
}

func (c *conn) writeLoop() {
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	var buf []byte
	broken := false
	for sl := range c.queue {
		select {
		case <-sl.done:
		case <-c.ctx.Done():
			broken = true
		}
		if broken || sl.resp == nil {
			continue
		}
		sl.resp.SetVersion(sl.version)
		if f, ok := sl.resp.(framer); ok {
			// Large zero-copy frame: flush what is buffered (order!),
			// then writev the frame's buffers straight to the socket.
			bufs := f.frame(sl.corrID)
			n := 0
			for _, b := range bufs {
				n += len(b)
			}
			if err := bw.Flush(); err != nil {
				broken = true
				c.close()
				continue
			}
			_, err := bufs.WriteTo(c.nc)
			if r, ok := sl.resp.(interface{ release() }); ok {
				r.release() // the frame's batch bytes are no longer needed
			}
			if err != nil {
				broken = true
				c.close()
				continue
			}
			c.s.stats.BytesOut.Add(int64(n))
		} else {
			buf = encodeResponse(buf[:0], sl.key, sl.corrID, sl.resp)
			if _, err := bw.Write(buf); err != nil {
				broken = true
				c.close()
				continue
			}
			c.s.stats.BytesOut.Add(int64(len(buf)))
		}
		if len(c.queue) == 0 {
			if err := bw.Flush(); err != nil {
				broken = true
				c.close()
				continue
			}
		}
		d := time.Since(sl.start)
		if sl.key >= 0 && int(sl.key) < len(c.s.stats.requestsByKey) {
			c.s.stats.requestsByKey[sl.key].Add(1)
			c.s.stats.requestLatencySumN[sl.key].Add(int64(d))
		}
		if hook := c.s.cfg.RequestHook; hook != nil {
			hook(sl.key, sl.version, d)
		}
		if cap(buf) > 4<<20 {
			buf = nil // do not pin a huge fetch buffer
		}
	}
	if !broken {
		_ = bw.Flush()
	}
}

// encodeResponse frames a response: int32 size, int32 correlation id, the
// response header's tagged fields when the response is flexible (except
// ApiVersions, whose response header is always v0 so any client can parse
// it), then the body.
func encodeResponse(dst []byte, key int16, corrID int32, resp kmsg.Response) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corrID))
	if resp.IsFlexible() && key != kmsg.ApiVersions.Int16() {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst, uint32(len(dst)-4))
	return dst
}

// request is one decoded request as handlers see it.
type request struct {
	s    *Server
	c    *conn
	ctx  context.Context
	hdr  header
	kreq kmsg.Request
}

// advertised is the host and port to tell this client to dial for this
// broker: the connection's listener's advertised endpoint, or the
// configured AdvertisedHost/Port for a listener without one.
func (r *request) advertised() (string, int32) {
	e := r.c.ln.AdvertisedFor(r.c.nc.LocalAddr())
	if r.c.ln.Spec().Advertise == "" {
		if r.s.advHost != "" {
			e.Host = r.s.advHost
		}
		if r.s.advPort != 0 {
			e.Port = int(r.s.advPort)
		}
	}
	return e.Host, int32(e.Port)
}
