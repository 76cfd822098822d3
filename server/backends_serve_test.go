package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/internal/testenv/etcdtest"
	"github.com/nereusstream/nereus-go/internal/testenv/restload"
	"github.com/nereusstream/nereus-go/internal/testenv/s3test"
	"github.com/nereusstream/nereus-go/internal/testserver"
	"github.com/nereusstream/nereus-go/objectstore/s3store"
)

// s3Env passes the versitygw credentials the way an operator should: in
// the environment, never on the command line.
func s3Env(cfg s3store.Config) []string {
	return []string{"NEREUS_S3_ACCESS_KEY=" + cfg.AccessKeyID, "NEREUS_S3_SECRET_KEY=" + cfg.SecretAccessKey}
}

// TestServeOnS3AndEtcdSurvivesKill9: the real `nereus serve` binary runs
// with its Object WAL on S3 (versitygw) and its metadata in etcd (embedded
// in this test process); it is SIGKILLed during a steady REST append load
// and restarted, several times, and every acknowledged append reads back
// at its offset. /healthz reports the backends; the data really lands in
// the bucket and in etcd, not in the data dir; the secret key never
// appears in the server's log.
//
// NEREUS_CRASH_CYCLES overrides the number of kill/restart cycles
// (default 4; 2 with -short).
func TestServeOnS3AndEtcdSurvivesKill9(t *testing.T) {
	cycles := 4
	if testing.Short() {
		cycles = 2
	}
	if v := os.Getenv("NEREUS_CRASH_CYCLES"); v != "" {
		if _, err := fmt.Sscan(v, &cycles); err != nil || cycles < 1 {
			t.Fatalf("NEREUS_CRASH_CYCLES=%q: want a positive integer", v)
		}
	}
	s3srv := s3test.Require(t)
	s3cfg := s3srv.Config(s3srv.NewBucket(t))
	etcdEndpoint, etcdPrefix := etcdtest.Endpoint(t), etcdtest.Prefix()

	srv := testserver.Start(t, testserver.Options{
		DisableKafka: true, DisablePulsar: true,
		Args: []string{
			"--object-store", "s3://" + s3cfg.Bucket + "/cluster-1",
			"--s3-endpoint", s3cfg.Endpoint, "--s3-path-style",
			"--metadata", "etcd://" + etcdEndpoint + etcdPrefix,
		},
		Env: s3Env(s3cfg),
	})
	h := srv.Health()
	wantObj := adminapi.StorageBackend{Kind: "s3", Location: "s3://" + s3cfg.Bucket + "/cluster-1/", Endpoint: s3cfg.Endpoint}
	wantMeta := adminapi.StorageBackend{Kind: "etcd", Location: "etcd://" + etcdEndpoint + etcdPrefix}
	if !h.Durable || h.ObjectStore == nil || *h.ObjectStore != wantObj || h.Metadata == nil || *h.Metadata != wantMeta {
		t.Fatalf("/healthz: %+v (objectStore %+v, metadata %+v); want durable on %+v and %+v", h, h.ObjectStore, h.Metadata, wantObj, wantMeta)
	}

	metrics := fetch(t, srv.URL()+"/metrics")
	if want := `nereus_storage_backend_info{metadata="etcd",object_store="s3"} 1`; !strings.Contains(metrics, want) {
		t.Fatalf("/metrics lacks %s", want)
	}

	c := srv.Client()
	const name = "orders"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: name})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	load := restload.New(c, name)
	restload.KillCycles(t, srv, load, cycles, 50, 3)

	// Where the data went: WAL segments under the bucket prefix, stream
	// heads under the etcd prefix, and neither embedded store in the
	// data dir.
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s3c, err := s3store.New(ctx, s3cfg)
	if err != nil {
		t.Fatal(err)
	}
	out, err := s3c.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(s3cfg.Bucket), Prefix: aws.String("cluster-1/wal/" + h.NodeID + "/")})
	if err != nil || len(out.Contents) == 0 {
		t.Fatalf("no WAL objects under cluster-1/wal/%s/ in the bucket (err %v)", h.NodeID, err)
	}
	ec, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdEndpoint}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	keys, err := ec.Get(ctx, etcdPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || keys.Count == 0 {
		t.Fatalf("no keys under %s in etcd (err %v)", etcdPrefix, err)
	}
	for _, p := range []string{"metadata.db", "metadata.log", "objects"} {
		if _, err := os.Stat(filepath.Join(srv.DataDir(), p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("data dir has %s (err %v): the embedded store was used", p, err)
		}
	}
	log, err := os.ReadFile(srv.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), s3cfg.SecretAccessKey) {
		t.Fatal("the S3 secret key appears in the server log")
	}
	t.Logf("%d WAL objects listed (first page), %d etcd keys; %d acknowledged appends over %d SIGKILLs",
		len(out.Contents), keys.Count, load.Acks.Count(), cycles)
}

// TestServeBackendStartupErrors: a missing bucket, an unreachable etcd and
// a data dir recorded for other stores each stop `nereus serve` at
// start-up with a non-zero exit and one clear line.
func TestServeBackendStartupErrors(t *testing.T) {
	s3srv := s3test.Require(t)
	s3cfg := s3srv.Config("nereus-no-such-bucket")
	bin := testserver.Binary(t)
	closedEtcd := testserver.FreePort(t)
	embeddedDir := t.TempDir()
	cases := []struct {
		name, dataDir string
		args          []string
		env           []string
		want          string
	}{
		{"missing bucket", "", []string{"--object-store", "s3://nereus-no-such-bucket", "--s3-endpoint", s3cfg.Endpoint, "--s3-path-style"},
			s3Env(s3cfg), `bucket "nereus-no-such-bucket" does not exist`},
		{"etcd unreachable", "", []string{"--metadata", "etcd://" + closedEtcd, "--backend-timeout", "2s"},
			nil, "etcd did not answer within 2s"},
		{"unknown scheme", "", []string{"--object-store", "gs://bucket"}, nil, `unknown scheme "gs"`},
		{"data dir of other stores", embeddedDir, []string{"--metadata", "etcd://" + etcdtest.Endpoint(t) + etcdtest.Prefix()},
			nil, "last ran on object store file and metadata log"},
	}
	// The embedded stores' data dir: one clean start and stop on the
	// defaults records them.
	first := testserver.Start(t, testserver.Options{DataDir: embeddedDir, DisableKafka: true, DisablePulsar: true})
	first.Stop()

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dataDir
			if dir == "" {
				dir = t.TempDir()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			args := append([]string{"serve", "--data-dir", dir, "--http-addr", "127.0.0.1:0", "--kafka-addr", "", "--pulsar-addr", ""}, tc.args...)
			cmd := exec.CommandContext(ctx, bin, args...)
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "NEREUS_") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(cmd.Env, tc.env...)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || ctx.Err() != nil {
				t.Fatalf("nereus serve did not fail at start-up (err %v):\n%s", err, out)
			}
			var errLines []string
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if strings.Contains(l, tc.want) {
					errLines = append(errLines, l)
				}
			}
			if len(errLines) != 1 {
				t.Fatalf("want exactly one line mentioning %q, output:\n%s", tc.want, out)
			}
			if strings.Contains(string(out), s3cfg.SecretAccessKey) {
				t.Fatalf("the secret key appears in the output:\n%s", out)
			}
			t.Logf("exit %d: %s", exit.ExitCode(), errLines[0])
		})
	}
}

func fetch(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(body)
}

// TestServeOnLogMetadataSurvivesKill9: `--metadata log` runs the stream
// core on metadata/logstore in <data-dir>/metadata.log, and no acknowledged
// append is lost over SIGKILL restarts; the data dir records log (so it
// then refuses bolt: TestBackendsRecord).
func TestServeOnLogMetadataSurvivesKill9(t *testing.T) {
	dir := t.TempDir()
	srv := testserver.Start(t, testserver.Options{DataDir: dir, Args: []string{"--metadata", "log"}, DisableKafka: true, DisablePulsar: true})
	h := srv.Health()
	if h.Metadata == nil || h.Metadata.Kind != "log" || !strings.HasSuffix(h.Metadata.Location, "metadata.log") || !h.Durable {
		t.Fatalf("health: %+v metadata %+v", h, h.Metadata)
	}
	c := srv.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: "logmeta"})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	restload.KillCycles(t, srv, restload.New(c, "logmeta"), 3, 50, 1)
	srv.Stop()
	if _, err := os.Stat(filepath.Join(dir, "metadata.db")); !os.IsNotExist(err) {
		t.Fatalf("a bolt file appeared in a log-metadata data dir: %v", err)
	}
	if rec, err := os.ReadFile(filepath.Join(dir, "storage-backends")); err != nil || !strings.Contains(string(rec), `"metadata":"log"`) {
		t.Fatalf("data dir record %s (%v): want metadata log", rec, err)
	}
}

// TestServeDefaultMetadata: on its defaults (--metadata auto) a new data
// dir gets logstore, and a data dir that already ran on bbolt keeps it —
// also one from before the storage-backends record (only metadata.db says
// what it ran on) — and says so in the start-up log.
func TestServeDefaultMetadata(t *testing.T) {
	fresh := testserver.Start(t, testserver.Options{DisableKafka: true, DisablePulsar: true})
	if h := fresh.Health(); h.Metadata == nil || h.Metadata.Kind != "log" {
		t.Fatalf("new data dir on the defaults: metadata %+v", h.Metadata)
	}
	fresh.Stop()

	dir := t.TempDir()
	old := testserver.Start(t, testserver.Options{DataDir: dir, Args: []string{"--metadata", "bolt"}, DisableKafka: true, DisablePulsar: true})
	old.Stop()
	if err := os.Remove(filepath.Join(dir, "storage-backends")); err != nil {
		t.Fatal(err) // now it looks like a data dir from before the record
	}
	for round := range 2 {
		srv := testserver.Start(t, testserver.Options{DataDir: dir, DisableKafka: true, DisablePulsar: true})
		if h := srv.Health(); h.Metadata == nil || h.Metadata.Kind != "bolt" {
			t.Fatalf("round %d: bolt data dir on the defaults: metadata %+v", round, h.Metadata)
		}
		srv.Stop()
		log, err := os.ReadFile(srv.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(log), "metadata_chosen_by") || !strings.Contains(string(log), "keeps bolt") && !strings.Contains(string(log), "record") {
			t.Fatalf("round %d: the start-up log does not say why bolt:\n%s", round, log)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "metadata.log")); !os.IsNotExist(err) {
		t.Fatalf("a log store appeared in a bolt data dir: %v", err)
	}
}
