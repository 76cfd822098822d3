package pulsar

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nereusstream/nereus-go/listener"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
)

// conn is one client connection.
type conn struct {
	s  *Server
	nc net.Conn
	// ln is the listener the connection arrived on (its group name picks
	// the URLs LOOKUP answers with).
	ln  *listener.Bound
	log *slog.Logger

	out       chan []byte
	closed    chan struct{}
	closeOnce sync.Once
	lastRecv  atomic.Int64 // unix nanos of the last frame received

	// Set by CONNECT (reader goroutine) before any other command runs.
	connected       bool
	protocolVersion int32
	brokerEntryMeta bool
	clientVersion   string

	// Authentication (auth.go). id is set by CONNECT and replaced by an
	// AUTH_RESPONSE; authMu guards it against the refresh check.
	authMu           sync.Mutex
	id               identity
	supportsRefresh  bool
	challengePending bool

	mu        sync.Mutex
	producers map[uint64]*producer
	consumers map[uint64]*consumer
	wg        sync.WaitGroup // slow-command goroutines
}

func newConn(s *Server, nc net.Conn, ln *listener.Bound) *conn {
	c := &conn{
		s: s, nc: nc, ln: ln,
		log:       s.log.With("remote", nc.RemoteAddr().String()),
		out:       make(chan []byte, 512),
		closed:    make(chan struct{}),
		producers: map[uint64]*producer{},
		consumers: map[uint64]*consumer{},
	}
	c.lastRecv.Store(time.Now().UnixNano())
	return c
}

func (c *conn) run() {
	defer c.s.removeConn(c)
	if err := listener.Handshake(c.nc, 0); err != nil {
		c.log.Debug("pulsar TLS handshake failed", "listener", c.ln.Spec().ID(), "err", err)
		c.close()
		return
	}
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	keepAliveDone := make(chan struct{})
	go func() {
		defer close(keepAliveDone)
		c.keepAlive()
	}()
	if c.s.cfg.Auth.enabled() {
		authDone := make(chan struct{})
		go func() {
			defer close(authDone)
			c.authCheckLoop()
		}()
		defer func() { <-authDone }()
	}
	if err := c.readLoop(); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		c.log.Info("closing pulsar connection", "err", err)
	}
	c.close()
	<-writerDone
	<-keepAliveDone
	c.wg.Wait()
	c.cleanup()
}

func (c *conn) readLoop() error {
	r := wire.NewReader(c.nc, c.s.cfg.MaxMessageSize+wire.FramePadding)
	for {
		f, err := r.ReadFrame()
		if err != nil {
			return err
		}
		c.lastRecv.Store(time.Now().UnixNano())
		if err := c.handle(f); err != nil {
			return err
		}
	}
}

func (c *conn) handle(f wire.Frame) error {
	if f.Cmd.Type == nil {
		return c.unsupported(f, f.UnknownType)
	}
	t := f.Cmd.GetType()
	h, ok := handlers[t]
	if !ok {
		return c.unsupported(f, int32(t))
	}
	if !c.connected && !h.beforeConnect {
		return errors.New("command before CONNECT")
	}
	return h.fn(c, f)
}

// unsupported answers a command this broker does not serve with an ERROR
// carrying its request id, when it has one, and keeps the connection.
func (c *conn) unsupported(f wire.Frame, typ int32) error {
	name := pb.BaseCommand_Type(typ).String()
	c.log.Debug("unsupported pulsar command", "type", name)
	if !c.connected {
		return errors.New("unsupported command before CONNECT: " + name)
	}
	reqID, _ := wire.UnknownRequestID(f.Cmd, typ)
	c.sendError(reqID, pb.ServerError_NotAllowedError, "command "+name+" is not supported by this broker")
	return nil
}

// writeLoop writes queued frames, flushing when the queue runs dry so
// back-to-back frames share one syscall.
func (c *conn) writeLoop() {
	bw := bufio.NewWriterSize(c.nc, 64<<10)
	for {
		select {
		case b := <-c.out:
			if _, err := bw.Write(b); err != nil {
				c.close()
				return
			}
		drain:
			for {
				select {
				case b := <-c.out:
					if _, err := bw.Write(b); err != nil {
						c.close()
						return
					}
				default:
					break drain
				}
			}
			if err := bw.Flush(); err != nil {
				c.close()
				return
			}
		case <-c.closed:
			return
		}
	}
}

func (c *conn) keepAlive() {
	iv := c.s.cfg.KeepAliveInterval
	tick := time.NewTicker(iv)
	defer tick.Stop()
	for {
		select {
		case <-c.closed:
			return
		case <-tick.C:
			idle := time.Since(time.Unix(0, c.lastRecv.Load()))
			if idle > 2*iv {
				c.log.Info("pulsar client timed out", "idle", idle)
				c.close()
				return
			}
			if idle > iv/2 {
				c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_PING.Enum(), Ping: &pb.CommandPing{}})
			}
		}
	}
}

// send queues a frame; false if the connection is closed.
func (c *conn) send(frame []byte) bool {
	select {
	case c.out <- frame:
		return true
	case <-c.closed:
		return false
	}
}

func (c *conn) sendCommand(cmd *pb.BaseCommand) bool {
	b, err := wire.AppendCommand(nil, cmd)
	if err != nil {
		c.log.Error("encode pulsar command", "err", err)
		return false
	}
	return c.send(b)
}

func (c *conn) sendSuccess(reqID uint64) {
	c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_SUCCESS.Enum(), Success: &pb.CommandSuccess{RequestId: proto.Uint64(reqID)}})
}

func (c *conn) sendError(reqID uint64, code pb.ServerError, msg string) {
	c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_ERROR.Enum(), Error: &pb.CommandError{
		RequestId: proto.Uint64(reqID), Error: code.Enum(), Message: proto.String(msg)}})
}

func (c *conn) sendErr(reqID uint64, err error) {
	code, msg := toServerError(err)
	c.sendError(reqID, code, msg)
}

// async runs a slow command off the reader goroutine.
func (c *conn) async(fn func(ctx context.Context)) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.s.ctx, 30*time.Second)
		defer cancel()
		fn(ctx)
	}()
}

func (c *conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

func (c *conn) close() {
	c.closeOnce.Do(func() {
		close(c.closed)
		_ = c.nc.Close()
	})
}

// cleanup detaches the connection's producers and consumers from their
// topics once every goroutine of the connection has stopped.
func (c *conn) cleanup() {
	c.mu.Lock()
	ps := c.producers
	cs := c.consumers
	c.producers, c.consumers = map[uint64]*producer{}, map[uint64]*consumer{}
	c.mu.Unlock()
	for _, p := range ps {
		p.detach()
	}
	for _, cons := range cs {
		cons.detach()
	}
}

func (c *conn) producer(id uint64) *producer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.producers[id]
}

func (c *conn) consumer(id uint64) *consumer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.consumers[id]
}
