package pulsarbench

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nereusstream/nereus-go/metadata/memstore"
	"github.com/nereusstream/nereus-go/pulsar"
	"github.com/nereusstream/nereus-go/stream/streammem"
)

// InProcess is a Nereus Pulsar broker over in-memory storage, for
// benchmarking the front end alone (no WAL, no object store).
type InProcess struct {
	ServiceURL, AdminURL string
	srv                  *pulsar.Server
	hsrv                 *http.Server
}

// StartInProcess starts a broker on free loopback ports.
func StartInProcess() (*InProcess, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	admin := "http://" + hln.Addr().String()
	srv, err := pulsar.NewServer(pulsar.Config{HTTPAdvertisedURL: admin,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, streammem.New(), memstore.New())
	if err != nil {
		return nil, err
	}
	go func() { _ = srv.Serve(ln) }()
	hsrv := &http.Server{Handler: srv.HTTPHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hsrv.Serve(hln) }()
	return &InProcess{ServiceURL: "pulsar://" + ln.Addr().String(), AdminURL: admin, srv: srv, hsrv: hsrv}, nil
}

// Close stops the broker.
func (p *InProcess) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = p.hsrv.Close()
	return p.srv.Shutdown(ctx)
}
