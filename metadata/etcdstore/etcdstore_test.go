package etcdstore_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/etcdstore"
	"github.com/nereusstream/nereus-go/metadata/metadatatest"
)

// One embedded etcd serves the whole package, on loopback ports the OS
// picks; each test gets its own key prefix. It starts on first use, inside
// a test: starting it in TestMain before m.Run races with the testing
// package's own start-up (etcd's goroutines read process globals that
// M.Run initialises).
var (
	startOnce sync.Once
	startErr  error
	client    *clientv3.Client
	etcd      *embed.Etcd
	etcdDir   string
	namespace atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	if client != nil {
		client.Close()
	}
	if etcd != nil {
		etcd.Close()
	}
	if etcdDir != "" {
		os.RemoveAll(etcdDir)
	}
	os.Exit(code)
}

func startEtcd() error {
	dir, err := os.MkdirTemp("", "nereus-etcd-")
	if err != nil {
		return err
	}
	etcdDir = dir
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.LogLevel = "error"
	local := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{local}
	cfg.AdvertiseClientUrls = []url.URL{local}
	cfg.ListenPeerUrls = []url.URL{local}
	cfg.AdvertisePeerUrls = []url.URL{local}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start embedded etcd: %w", err)
	}
	etcd = e
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		return fmt.Errorf("embedded etcd not ready within 60s")
	}
	client, err = clientv3.New(clientv3.Config{
		Endpoints:   []string{e.Clients[0].Addr().String()},
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	return nil
}

func openStore(tb testing.TB) *etcdstore.Store {
	tb.Helper()
	startOnce.Do(func() { startErr = startEtcd() })
	if startErr != nil {
		tb.Fatal(startErr)
	}
	return etcdstore.New(client, etcdstore.Options{Prefix: fmt.Sprintf("/nereus-test/%d/", namespace.Add(1))})
}

func TestConformance(t *testing.T) {
	metadatatest.Run(t, func(t *testing.T) metadata.Store { return openStore(t) })
}

// Values that together exceed one transaction's byte budget are split
// across transactions and all land.
func TestBatchSplitsLargeValues(t *testing.T) {
	s := openStore(t)
	defer s.Close()
	ctx := context.Background()
	big := bytes.Repeat([]byte("v"), 600<<10)
	ops := make([]metadata.Op, 4)
	for i := range ops {
		ops[i] = metadata.Op{Kind: metadata.OpPut, Key: fmt.Sprintf("big/%d", i), Value: big, Expected: metadata.NotExists}
	}
	res, err := s.Batch(ctx, ops)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("op %d: %v", i, r.Err)
		}
		got, err := s.Get(ctx, ops[i].Key)
		if err != nil || !bytes.Equal(got.Value, big) || got.Version != r.Version {
			t.Fatalf("op %d read back: %d bytes @%d, %v", i, len(got.Value), got.Version, err)
		}
	}
}
