package pulsar

import (
	"fmt"

	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
)

// handlerFunc serves one command. A returned error is fatal for the
// connection (it is closed); protocol-level failures are answered on the
// wire and return nil.
type handlerFunc func(c *conn, f wire.Frame) error

type handler struct {
	fn handlerFunc
	// beforeConnect allows the command before CONNECT completed.
	beforeConnect bool
}

// handlers is the command registry; each cmd_*.go file registers its
// commands in init(). Registration panics on a duplicate.
var handlers = map[pb.BaseCommand_Type]handler{}

func register(t pb.BaseCommand_Type, fn handlerFunc) {
	if _, dup := handlers[t]; dup {
		panic(fmt.Sprintf("nereus/pulsar: duplicate handler for %v", t))
	}
	handlers[t] = handler{fn: fn}
}

func registerPreConnect(t pb.BaseCommand_Type, fn handlerFunc) {
	register(t, fn)
	h := handlers[t]
	h.beforeConnect = true
	handlers[t] = h
}
