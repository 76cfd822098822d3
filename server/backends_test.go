package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseObjectStore(t *testing.T) {
	ok := []struct {
		in   string
		want objectStoreSpec
	}{
		{"file", objectStoreSpec{kind: "file"}},
		{"s3://my-bucket", objectStoreSpec{kind: "s3", bucket: "my-bucket"}},
		{"s3://my-bucket/", objectStoreSpec{kind: "s3", bucket: "my-bucket"}},
		{"s3://my-bucket/prod", objectStoreSpec{kind: "s3", bucket: "my-bucket", prefix: "prod/"}},
		{"s3://my.bucket-1/a/b/", objectStoreSpec{kind: "s3", bucket: "my.bucket-1", prefix: "a/b/"}},
	}
	for _, tc := range ok {
		got, err := parseObjectStore(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseObjectStore(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	bad := []struct{ in, want string }{
		{"", "want file or s3://BUCKET"},
		{"files", "want file or s3://BUCKET"},
		{"gs://bucket", `unknown scheme "gs"`},
		{"file:///var/nereus", `unknown scheme "file"`},
		{"s3://", "missing bucket"},
		{"s3:///prefix", "missing bucket"},
		{"s3://ab", "3 to 63 characters"},
		{"s3://My_Bucket", "lower-case letters"},
		{"s3://-bucket", "lower-case letters"},
		{"s3://bucket?region=x", "query and fragment"},
		{"s3://bucket/a//b", "prefix"},
	}
	for _, tc := range bad {
		_, err := parseObjectStore(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseObjectStore(%q): error %v, want one mentioning %q", tc.in, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("parseObjectStore(%q): error is not one line: %q", tc.in, err)
		}
	}
	_, err := parseObjectStore("s3://AKIAX:hunter2@bucket")
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "credentials") {
		t.Errorf("credentials in the URL: error %v, want a refusal that does not repeat them", err)
	}
}

func TestParseMetadata(t *testing.T) {
	ok := []struct {
		in   string
		want metadataSpec
	}{
		{"bolt", metadataSpec{kind: "bolt"}},
		{"log", metadataSpec{kind: "log"}},
		{"etcd://127.0.0.1:2379", metadataSpec{kind: "etcd", endpoints: []string{"127.0.0.1:2379"}, prefix: "/nereus/"}},
		{"etcd://127.0.0.1:2379/", metadataSpec{kind: "etcd", endpoints: []string{"127.0.0.1:2379"}, prefix: "/nereus/"}},
		{"etcd://a:1,b:2,[::1]:3/prod", metadataSpec{kind: "etcd", endpoints: []string{"a:1", "b:2", "[::1]:3"}, prefix: "/prod/"}},
		{"etcd://a:1/team/nereus/", metadataSpec{kind: "etcd", endpoints: []string{"a:1"}, prefix: "/team/nereus/"}},
	}
	for _, tc := range ok {
		got, err := parseMetadata(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseMetadata(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	bad := []struct{ in, want string }{
		{"", "want bolt, log or etcd://"},
		{"boltdb", "want bolt, log or etcd://"},
		{"zk://127.0.0.1:2181", `unknown scheme "zk"`},
		{"etcd://", "missing etcd endpoint"},
		{"etcd:///prefix", "missing etcd endpoint"},
		{"etcd://localhost", `endpoint "localhost": want HOST:PORT`},
		{"etcd://a:1,", `endpoint "": want HOST:PORT`},
		{"etcd://a:99999", "port must be 1-65535"},
		{"etcd://a:x", "port must be 1-65535"},
		{"etcd://a:1/x//y", "empty path segment"},
		{"etcd://a:1?x=y", "query and fragment"},
	}
	for _, tc := range bad {
		_, err := parseMetadata(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseMetadata(%q): error %v, want one mentioning %q", tc.in, err, tc.want)
		}
	}
	_, err := parseMetadata("etcd://root:hunter2@127.0.0.1:2379")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("credentials in the URL: error %v, want a refusal that does not repeat them", err)
	}
}

// TestConfigBackendSettings: the backend settings follow flag > env > file
// > default like every other setting, and --s3-path-style needs no value.
func TestConfigBackendSettings(t *testing.T) {
	def := DefaultConfig()
	if def.ObjectStore != "file" || def.Metadata != "auto" || def.S3Region != "us-east-1" || def.S3PathStyle ||
		def.BackendTimeout != 15*time.Second {
		t.Fatalf("unexpected backend defaults: %+v", def)
	}
	file := filepath.Join(t.TempDir(), "nereus.yaml")
	if err := os.WriteFile(file, []byte(`
object-store: s3://from-file
s3-region: eu-west-1
s3-path-style: true
metadata: etcd://10.0.0.1:2379
backend-timeout: 3s
`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := envOf(map[string]string{
		"NEREUS_CONFIG":        file,
		"NEREUS_S3_ENDPOINT":   "http://127.0.0.1:7070",
		"NEREUS_S3_ACCESS_KEY": "env-access",
		"NEREUS_S3_SECRET_KEY": "env-secret",
		"NEREUS_METADATA":      "etcd://10.0.0.2:2379/env",
	})
	cfg, err := LoadConfig(parseFlags(t, "--object-store", "s3://from-flag/pfx", "--metadata", "etcd://10.0.0.3:2379,10.0.0.4:2379"), env)
	if err != nil {
		t.Fatal(err)
	}
	want := def
	want.ObjectStore = "s3://from-flag/pfx"   // flag beats file
	want.S3Endpoint = "http://127.0.0.1:7070" // env only
	want.S3Region = "eu-west-1"               // file only
	want.S3PathStyle = true                   // file only
	want.S3AccessKey, want.S3SecretKey = "env-access", "env-secret"
	want.Metadata = "etcd://10.0.0.3:2379,10.0.0.4:2379" // flag beats env and file
	want.BackendTimeout = 3 * time.Second
	if cfg != want {
		t.Fatalf("got  %+v\nwant %+v", cfg, want)
	}

	// A bare --s3-path-style is true; =false overrides the env.
	cfg, err = LoadConfig(parseFlags(t, "--object-store", "s3://b-1", "--s3-path-style"), envOf(nil))
	if err != nil || !cfg.S3PathStyle {
		t.Fatalf("--s3-path-style: %+v, %v", cfg, err)
	}
	cfg, err = LoadConfig(parseFlags(t, "--object-store", "s3://b-1", "--s3-path-style=false"),
		envOf(map[string]string{"NEREUS_S3_PATH_STYLE": "true"}))
	if err != nil || cfg.S3PathStyle {
		t.Fatalf("--s3-path-style=false over env true: %+v, %v", cfg, err)
	}
}

func TestConfigBackendErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown object-store scheme", []string{"--object-store", "gcs://b"}, nil, `unknown scheme "gcs"`},
		{"missing bucket", []string{"--object-store", "s3://"}, nil, "missing bucket"},
		{"unknown metadata scheme", []string{"--metadata", "consul://h:1"}, nil, `unknown scheme "consul"`},
		{"etcd without port", []string{"--metadata", "etcd://etcd.internal"}, nil, "want HOST:PORT"},
		{"s3 flags with file", []string{"--s3-endpoint", "http://127.0.0.1:7070", "--s3-path-style"}, nil,
			`s3-endpoint, s3-path-style set but object-store is "file"`},
		{"s3 env with file", nil, map[string]string{"NEREUS_S3_REGION": "eu-west-1"}, "s3-region set but object-store"},
		{"access key alone", []string{"--object-store", "s3://b-1", "--s3-access-key", "AKIA"}, nil, "set both s3-access-key and s3-secret-key"},
		{"secret alone", []string{"--object-store", "s3://b-1"}, map[string]string{"NEREUS_S3_SECRET_KEY": "x"}, "set both"},
		{"bad endpoint", []string{"--object-store", "s3://b-1", "--s3-endpoint", "127.0.0.1:7070"}, nil, "s3-endpoint"},
		{"empty region", []string{"--object-store", "s3://b-1", "--s3-region", ""}, nil, "s3-region must not be empty"},
		{"bad path-style env", nil, map[string]string{"NEREUS_S3_PATH_STYLE": "maybe"}, "NEREUS_S3_PATH_STYLE"},
		{"bad backend timeout", []string{"--backend-timeout", "0s"}, nil, "backend-timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(parseFlags(t, tc.args...), envOf(tc.env))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestSecretNeverPrinted: the S3 secret key does not appear when a Config
// is formatted, logged, or named in a configuration error.
func TestSecretNeverPrinted(t *testing.T) {
	const secret = "wJalrXUtnFEMI-K7MDENG"
	cfg := DefaultConfig()
	cfg.ObjectStore, cfg.S3AccessKey, cfg.S3SecretKey = "s3://b-1", "AKIA", Secret(secret)
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "cfg", cfg, "secret", cfg.S3SecretKey)
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "cfg", cfg, "secret", cfg.S3SecretKey)
	for _, out := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), logs.String()} {
		if strings.Contains(out, secret) {
			t.Fatalf("secret printed: %s", out)
		}
	}
	if !strings.Contains(fmt.Sprintf("%+v", cfg), "[redacted]") {
		t.Fatalf("secret not shown as redacted: %+v", cfg)
	}
	_, err := LoadConfig(parseFlags(t, "--s3-secret-key", secret, "--object-store", "s3://b-1"), envOf(nil))
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("error %v: want a configuration error that does not repeat the secret", err)
	}
}

// TestBackendsRecord: a data dir remembers its stores and refuses to be
// started on others (its WAL would be recovered against the wrong commit
// authority).
func TestBackendsRecord(t *testing.T) {
	s3a, _ := parseObjectStore("s3://bucket-a/p")
	file, _ := parseObjectStore("file")
	etcd1, _ := parseMetadata("etcd://10.0.0.1:2379/x")
	etcd2, _ := parseMetadata("etcd://10.0.0.9:2379,10.0.0.8:2379/x") // same cluster data, other endpoints
	etcdY, _ := parseMetadata("etcd://10.0.0.1:2379/y")
	bolt, _ := parseMetadata("bolt")

	dir := t.TempDir()
	record, err := checkBackends(dir, s3a, etcd1)
	if err != nil || !record {
		t.Fatalf("fresh dir: record=%v err=%v", record, err)
	}
	if err := recordBackends(dir, s3a, etcd1); err != nil {
		t.Fatal(err)
	}
	if record, err := checkBackends(dir, s3a, etcd2); err != nil || record {
		t.Fatalf("same stores through other endpoints: record=%v err=%v", record, err)
	}
	for _, c := range []struct {
		obj  objectStoreSpec
		meta metadataSpec
	}{{s3a, etcdY}, {s3a, bolt}, {file, etcd1}} {
		_, err := checkBackends(dir, c.obj, c.meta)
		if err == nil || !strings.Contains(err.Error(), "last ran on object store s3://bucket-a/p/ and metadata etcd:/x/") {
			t.Fatalf("%s + %s: error %v, want a refusal naming the recorded stores", c.obj.identity(), c.meta.identity(), err)
		}
	}

	// A data dir from before the record: the embedded stores' files say
	// what it ran on.
	legacy := t.TempDir()
	if err := os.WriteFile(filepath.Join(legacy, "metadata.db"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := checkBackends(legacy, file, etcd1); err == nil || !strings.Contains(err.Error(), "object store file and metadata bolt") {
		t.Fatalf("legacy dir on etcd: %v", err)
	}
	if record, err := checkBackends(legacy, file, bolt); err != nil || !record {
		t.Fatalf("legacy dir on its own stores: record=%v err=%v", record, err)
	}

	// --metadata auto resolves to the store a data dir already runs on.
	for _, c := range []struct{ dir, want string }{{t.TempDir(), "log"}, {legacy, "bolt"}, {dir, "log"}} {
		if got, why := resolveMetadata(c.dir, MetadataAuto); got != c.want || why == "" {
			t.Fatalf("auto in %s: %s (%s), want %s", c.dir, got, why, c.want)
		}
	}
	if got, _ := resolveMetadata(legacy, MetadataLog); got != MetadataLog {
		t.Fatalf("an explicit --metadata is kept: %s", got)
	}

	// The two embedded metadata stores are different commit authorities.
	logDir := t.TempDir()
	logMeta, _ := parseMetadata("log")
	if err := recordBackends(logDir, file, logMeta); err != nil {
		t.Fatal(err)
	}
	if _, err := checkBackends(logDir, file, bolt); err == nil || !strings.Contains(err.Error(), "metadata log") {
		t.Fatalf("bolt on a log data dir: %v", err)
	}
	if _, err := checkBackends(legacy, file, logMeta); err == nil || !strings.Contains(err.Error(), "metadata bolt") {
		t.Fatalf("log on a legacy bolt data dir: %v", err)
	}
}

// TestOpenUnreachableBackends: start-up fails within backend-timeout with
// one clear line when etcd or the S3 endpoint does not answer.
func TestOpenUnreachableBackends(t *testing.T) {
	closed := closedPort(t)
	logger := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))

	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.BackendTimeout = time.Second
	cfg.Metadata = "etcd://" + closed
	start := time.Now()
	_, _, err := openMetadataStore(context.Background(), cfg, logger)
	if err == nil || !strings.Contains(err.Error(), "etcd did not answer within 1s") || !strings.Contains(err.Error(), closed) {
		t.Fatalf("unreachable etcd: %v", err)
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Fatalf("unreachable etcd took %v to fail", el)
	}

	cfg = DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.BackendTimeout = time.Second
	cfg.ObjectStore, cfg.S3Endpoint, cfg.S3PathStyle = "s3://bucket-x", "http://"+closed, true
	cfg.S3AccessKey, cfg.S3SecretKey = "AKIA", "not-printed-secret"
	_, _, _, err = openObjectStore(context.Background(), cfg, slog.New(slog.DiscardHandler), nil)
	if err == nil || !strings.Contains(err.Error(), "object-store s3://bucket-x/ at http://"+closed) ||
		strings.Contains(err.Error(), "not-printed-secret") {
		t.Fatalf("unreachable S3: %v", err)
	}
	t.Logf("unreachable S3: %v", err)
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
