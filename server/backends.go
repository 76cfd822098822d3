package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/metadata"
	"github.com/nereusstream/nereus-go/metadata/boltstore"
	"github.com/nereusstream/nereus-go/metadata/etcdstore"
	"github.com/nereusstream/nereus-go/metadata/logstore"
	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/fsstore"
	"github.com/nereusstream/nereus-go/objectstore/s3store"
)

// Backend selector values (and URL schemes) of --object-store and
// --metadata.
const (
	ObjectStoreFile = "file"
	objectStoreS3   = "s3"
	MetadataBolt    = "bolt"
	MetadataLog     = "log"
	// MetadataAuto (the default) is an embedded store: the one a data dir
	// already runs on, log for a new one (resolveMetadata).
	MetadataAuto = "auto"
	metadataEtcd = "etcd"
	// WALObjectStoreLog and WALObjectStoreFiles are the values of
	// --wal-object-store (Config.WALObjectStore).
	WALObjectStoreLog   = "log"
	WALObjectStoreFiles = "files"
	// DefaultEtcdPrefix namespaces Nereus' keys in etcd when the
	// --metadata URL names no prefix.
	DefaultEtcdPrefix = "/nereus/"
)

// objectStoreSpec is a parsed --object-store value.
type objectStoreSpec struct {
	kind   string // ObjectStoreFile or objectStoreS3
	bucket string // s3 only
	prefix string // s3 only: "" or "a/b/" (always ends with "/")
}

// identity names where the data lives, independent of how it is reached
// (endpoints may change; bucket and prefix may not).
func (s objectStoreSpec) identity() string {
	if s.kind == objectStoreS3 {
		return "s3://" + s.bucket + "/" + s.prefix
	}
	return s.kind
}

// metadataSpec is a parsed --metadata value.
type metadataSpec struct {
	kind      string   // MetadataBolt, MetadataLog or metadataEtcd
	endpoints []string // etcd only: host:port
	prefix    string   // etcd only: always starts and ends with "/"
}

func (s metadataSpec) identity() string {
	if s.kind == metadataEtcd {
		return "etcd:" + s.prefix
	}
	return s.kind
}

func (s metadataSpec) location() string {
	return "etcd://" + strings.Join(s.endpoints, ",") + s.prefix
}

// parseObjectStore parses "file" or "s3://BUCKET[/PREFIX]". Errors never
// repeat a value that may hold credentials.
func parseObjectStore(v string) (objectStoreSpec, error) {
	if v == ObjectStoreFile {
		return objectStoreSpec{kind: ObjectStoreFile}, nil
	}
	scheme, rest, ok := strings.Cut(v, "://")
	if !ok {
		return objectStoreSpec{}, fmt.Errorf("object-store %q: want %s or s3://BUCKET[/PREFIX]", v, ObjectStoreFile)
	}
	if scheme != objectStoreS3 {
		return objectStoreSpec{}, fmt.Errorf("object-store %q: unknown scheme %q (want %s or s3://BUCKET[/PREFIX])", v, scheme, ObjectStoreFile)
	}
	if strings.Contains(rest, "@") {
		return objectStoreSpec{}, errors.New("object-store: credentials in the URL are not supported; use --s3-access-key/--s3-secret-key or the AWS credential chain")
	}
	if strings.ContainsAny(rest, "?#") {
		return objectStoreSpec{}, fmt.Errorf("object-store %q: query and fragment are not supported; S3 settings have their own --s3-* flags", v)
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return objectStoreSpec{}, fmt.Errorf("object-store %q: missing bucket (want s3://BUCKET[/PREFIX])", v)
	}
	if err := checkBucketName(bucket); err != nil {
		return objectStoreSpec{}, fmt.Errorf("object-store %q: %w", v, err)
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		if err := objectstore.CheckKey(prefix); err != nil {
			return objectStoreSpec{}, fmt.Errorf("object-store %q: prefix: %w", v, err)
		}
		prefix += "/"
	}
	return objectStoreSpec{kind: objectStoreS3, bucket: bucket, prefix: prefix}, nil
}

// checkBucketName applies the S3 bucket naming rules that matter for
// addressing: 3-63 characters of lower-case letters, digits, '.' and '-',
// starting and ending with a letter or digit.
func checkBucketName(b string) error {
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("bucket name %q must be 3 to 63 characters", b)
	}
	for i, r := range b {
		alnum := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		if !alnum && ((r != '.' && r != '-') || i == 0 || i == len(b)-1) {
			return fmt.Errorf("bucket name %q: only lower-case letters, digits, '.' and '-' (not first or last)", b)
		}
	}
	return nil
}

// parseMetadata parses "bolt", "log" or "etcd://HOST:PORT[,HOST:PORT...][/PREFIX]".
func parseMetadata(v string) (metadataSpec, error) {
	if v == MetadataBolt || v == MetadataLog {
		return metadataSpec{kind: v}, nil
	}
	scheme, rest, ok := strings.Cut(v, "://")
	if !ok {
		return metadataSpec{}, fmt.Errorf("metadata %q: want %s, %s or etcd://HOST:PORT[,HOST:PORT...][/PREFIX]", v, MetadataBolt, MetadataLog)
	}
	if scheme != metadataEtcd {
		return metadataSpec{}, fmt.Errorf("metadata %q: unknown scheme %q (want %s, %s or etcd://HOST:PORT[,HOST:PORT...][/PREFIX])", v, scheme, MetadataBolt, MetadataLog)
	}
	if strings.Contains(rest, "@") {
		return metadataSpec{}, errors.New("metadata: credentials in the etcd URL are not supported")
	}
	if strings.ContainsAny(rest, "?#") {
		return metadataSpec{}, fmt.Errorf("metadata %q: query and fragment are not supported", v)
	}
	hosts, path, hasPath := strings.Cut(rest, "/")
	if hosts == "" {
		return metadataSpec{}, fmt.Errorf("metadata %q: missing etcd endpoint (want etcd://HOST:PORT[,HOST:PORT...][/PREFIX])", v)
	}
	spec := metadataSpec{kind: metadataEtcd, prefix: DefaultEtcdPrefix}
	for _, h := range strings.Split(hosts, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil || host == "" {
			return metadataSpec{}, fmt.Errorf("metadata %q: endpoint %q: want HOST:PORT", v, h)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return metadataSpec{}, fmt.Errorf("metadata %q: endpoint %q: port must be 1-65535", v, h)
		}
		spec.endpoints = append(spec.endpoints, h)
	}
	if hasPath && path != "" {
		spec.prefix = "/" + strings.TrimSuffix(path, "/") + "/"
		if strings.Contains(spec.prefix, "//") {
			return metadataSpec{}, fmt.Errorf("metadata %q: prefix %q has an empty path segment", v, spec.prefix)
		}
	}
	return spec, nil
}

// validateBackends checks --object-store, --metadata and the --s3-*
// settings against each other.
func (c Config) validateBackends() []error {
	var errs []error
	obj, objErr := parseObjectStore(c.ObjectStore)
	if objErr != nil {
		errs = append(errs, objErr)
	}
	if c.WALObjectStore != WALObjectStoreLog && c.WALObjectStore != WALObjectStoreFiles {
		errs = append(errs, fmt.Errorf("wal-object-store %q: want %s or %s", c.WALObjectStore, WALObjectStoreLog, WALObjectStoreFiles))
	}
	if c.Metadata != MetadataAuto {
		if _, err := parseMetadata(c.Metadata); err != nil {
			errs = append(errs, err)
		}
	}
	if objErr == nil && obj.kind != objectStoreS3 {
		def := DefaultConfig()
		var set []string
		if c.S3Endpoint != "" {
			set = append(set, "s3-endpoint")
		}
		if c.S3Region != def.S3Region {
			set = append(set, "s3-region")
		}
		if c.S3PathStyle {
			set = append(set, "s3-path-style")
		}
		if c.S3AccessKey != "" {
			set = append(set, "s3-access-key")
		}
		if c.S3SecretKey != "" {
			set = append(set, "s3-secret-key")
		}
		if len(set) > 0 {
			errs = append(errs, fmt.Errorf("%s set but object-store is %q: select S3 with --object-store s3://BUCKET[/PREFIX]",
				strings.Join(set, ", "), c.ObjectStore))
		}
	}
	if c.S3Endpoint != "" {
		u, err := url.Parse(c.S3Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			errs = append(errs, fmt.Errorf("s3-endpoint %q: want http(s)://HOST[:PORT] without credentials", redactURL(c.S3Endpoint)))
		}
	}
	if c.S3Region == "" {
		errs = append(errs, errors.New("s3-region must not be empty"))
	}
	if (c.S3AccessKey == "") != (c.S3SecretKey == "") {
		errs = append(errs, errors.New("set both s3-access-key and s3-secret-key, or neither (the AWS credential chain)"))
	}
	return errs
}

// redactURL drops the user-info part of a URL-ish string for messages.
func redactURL(s string) string {
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			return scheme + "://[redacted]@" + rest[at+1:]
		}
	}
	return s
}

// openMetadataStore builds the metadata store cfg selects. For etcd it
// waits (up to cfg.BackendTimeout) for one linearizable read to succeed,
// so an unreachable cluster fails start-up instead of the first append.
func openMetadataStore(ctx context.Context, cfg Config, logger *slog.Logger) (metadata.Store, adminapi.StorageBackend, error) {
	spec, err := parseMetadata(cfg.Metadata)
	if err != nil {
		return nil, adminapi.StorageBackend{}, err
	}
	switch spec.kind {
	case MetadataBolt:
		path := filepath.Join(cfg.DataDir, "metadata.db")
		s, err := boltstore.Open(path, boltstore.Options{})
		if err != nil {
			return nil, adminapi.StorageBackend{}, fmt.Errorf("opening metadata store %s: %w", path, err)
		}
		return s, adminapi.StorageBackend{Kind: MetadataBolt, Location: absPath(path)}, nil
	case MetadataLog:
		path := filepath.Join(cfg.DataDir, "metadata.log")
		s, err := logstore.Open(path, logstore.Options{})
		if err != nil {
			return nil, adminapi.StorageBackend{}, fmt.Errorf("opening metadata store %s: %w", path, err)
		}
		return s, adminapi.StorageBackend{Kind: MetadataLog, Location: absPath(path)}, nil
	default:
		s, err := openEtcd(ctx, spec, cfg, logger)
		if err != nil {
			return nil, adminapi.StorageBackend{}, err
		}
		return s, adminapi.StorageBackend{Kind: metadataEtcd, Location: spec.location()}, nil
	}
}

// etcdTLS is the client TLS configuration for etcd.
func etcdTLS(cfg Config) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.EtcdCAFile != "" {
		pem, err := os.ReadFile(cfg.EtcdCAFile)
		if err != nil {
			return nil, fmt.Errorf("etcd-ca-file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd-ca-file %s holds no PEM certificate", cfg.EtcdCAFile)
		}
	}
	if cfg.EtcdCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.EtcdCertFile, cfg.EtcdKeyFile)
		if err != nil {
			return nil, fmt.Errorf("etcd-cert-file / etcd-key-file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func openEtcd(ctx context.Context, spec metadataSpec, cfg Config, logger *slog.Logger) (*etcdstore.Store, error) {
	timeout := cfg.BackendTimeout
	where := spec.location()
	ccfg := clientv3.Config{
		Endpoints:            spec.endpoints,
		DialTimeout:          timeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.New(newZapToSlog(logger.With("component", "etcd-client"))),
	}
	if cfg.EtcdCAFile != "" || cfg.EtcdCertFile != "" {
		tc, err := etcdTLS(cfg)
		if err != nil {
			return nil, fmt.Errorf("metadata %s: %w", where, err)
		}
		ccfg.TLS = tc
	}
	if cfg.EtcdUsername != "" {
		pass, err := readSecret(cfg.EtcdPasswordFile, cfg.EtcdPassword, "etcd-password-file")
		if err != nil {
			return nil, fmt.Errorf("metadata %s: %w", where, err)
		}
		ccfg.Username, ccfg.Password = cfg.EtcdUsername, pass
	}
	s, err := etcdstore.Open(ccfg, etcdstore.Options{Prefix: spec.prefix})
	if err != nil {
		return nil, fmt.Errorf("metadata %s: %w", where, err)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Any answer proves a quorum is reachable: a missing key is fine.
	if _, err := s.Get(pctx, "nereus-probe"); err != nil && !errors.Is(err, metadata.ErrKeyNotFound) {
		_ = s.Close()
		if pctx.Err() != nil {
			// The client's error says no more than the deadline did.
			return nil, fmt.Errorf("metadata %s: etcd did not answer within %v (backend-timeout): is it running and reachable?", where, timeout)
		}
		return nil, fmt.Errorf("metadata %s: etcd read failed: %v", where, err)
	}
	return s, nil
}

// openObjectStore builds the object store cfg selects. For S3 it checks
// (up to cfg.BackendTimeout) that the bucket exists and is reachable with
// the configured credentials. close is nil when the store holds nothing
// to release.
func openObjectStore(ctx context.Context, cfg Config, logger *slog.Logger, reg prometheus.Registerer) (objectstore.ObjectStore, func() error, adminapi.StorageBackend, error) {
	spec, err := parseObjectStore(cfg.ObjectStore)
	if err != nil {
		return nil, nil, adminapi.StorageBackend{}, err
	}
	switch spec.kind {
	case ObjectStoreFile:
		dir := filepath.Join(cfg.DataDir, "objects")
		s, err := fsstore.Open(dir)
		if err != nil {
			return nil, nil, adminapi.StorageBackend{}, fmt.Errorf("opening object store %s: %w", dir, err)
		}
		if n := s.StaleTempFilesKept(); n > 0 {
			logger.Warn("object store: kept dead writers' temp files that share an inode with a published file "+
				"under a link count that does not cover both names; the file system needs fsck (e2fsck) "+
				"before those temp files can go", "dir", dir, "files", n)
		}
		objects, closeObjects, err := openWALObjectStore(ctx, cfg, s, logger, reg)
		if err != nil {
			_ = s.Close()
			return nil, nil, adminapi.StorageBackend{}, err
		}
		return objects, closeObjects, adminapi.StorageBackend{Kind: ObjectStoreFile, Location: absPath(dir)}, nil
	default:
		where := spec.identity()
		if cfg.S3Endpoint != "" {
			where += " at " + cfg.S3Endpoint
		}
		cctx, cancel := context.WithTimeout(ctx, cfg.BackendTimeout)
		defer cancel()
		s, err := s3store.New(cctx, s3store.Config{
			Bucket:          spec.bucket,
			Prefix:          spec.prefix,
			Region:          cfg.S3Region,
			Endpoint:        cfg.S3Endpoint,
			UsePathStyle:    cfg.S3PathStyle,
			AccessKeyID:     cfg.S3AccessKey,
			SecretAccessKey: string(cfg.S3SecretKey),
		})
		switch {
		case errors.Is(err, s3store.ErrNoSuchBucket):
			return nil, nil, adminapi.StorageBackend{}, fmt.Errorf("object-store %s: bucket %q does not exist (create it first)", where, spec.bucket)
		case err != nil && cctx.Err() != nil:
			return nil, nil, adminapi.StorageBackend{}, fmt.Errorf("object-store %s: no answer within %v (backend-timeout): %v", where, cfg.BackendTimeout, err)
		case err != nil:
			return nil, nil, adminapi.StorageBackend{}, fmt.Errorf("object-store %s: %v", where, err)
		}
		return s, nil, adminapi.StorageBackend{Kind: objectStoreS3, Location: spec.identity(), Endpoint: cfg.S3Endpoint}, nil
	}
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// backendsFile records, in the data dir, which stores this node's data
// lives in. The node's Object WAL (named by its node ID) is recovered at
// every start against the metadata store: recovering it against a
// different commit authority would judge its runs uncommitted and delete
// them. So a node refuses to start on stores other than the ones it last
// ran on.
const backendsFile = "storage-backends"

type backendsRecord struct {
	ObjectStore string `json:"objectStore"`
	Metadata    string `json:"metadata"`
}

// checkBackends compares the configured stores with the data dir's
// record, before anything is opened. record is true when there is no
// record yet: the caller writes one (recordBackends) once the stores
// opened. Data dirs from before the record existed ran on the embedded
// stores, which leave metadata.db or objects/ behind.
func checkBackends(dataDir string, obj objectStoreSpec, meta metadataSpec) (record bool, err error) {
	want := backendsRecord{ObjectStore: obj.identity(), Metadata: meta.identity()}
	path := filepath.Join(dataDir, backendsFile)
	var have backendsRecord
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(raw, &have); err != nil || have.ObjectStore == "" || have.Metadata == "" {
			return false, fmt.Errorf("%s is unreadable: remove it only if you know which stores this node last ran on", path)
		}
	case os.IsNotExist(err):
		if !exists(filepath.Join(dataDir, "metadata.db")) && !exists(filepath.Join(dataDir, "objects")) {
			return true, nil
		}
		have = backendsRecord{ObjectStore: ObjectStoreFile, Metadata: MetadataBolt}
		record = true
	default:
		return false, err
	}
	if have != want {
		return false, fmt.Errorf("data dir %s last ran on object store %s and metadata %s, not %s and %s: this node's Object WAL "+
			"must be recovered against the metadata it committed to. Use a fresh --data-dir for a node on other stores "+
			"(it gets a new node ID), or remove %s if the data really moved there",
			dataDir, have.ObjectStore, have.Metadata, want.ObjectStore, want.Metadata, path)
	}
	return record, nil
}

// resolveMetadata turns --metadata auto into an embedded store: the one
// the data dir's record names, bolt for a data dir from before the record
// (it has metadata.db or objects/: it ran on bbolt), and log (logstore)
// for a new data dir. It returns why, for the start-up log. A data dir never
// changes store: bolt and log are different commit authorities.
func resolveMetadata(dataDir, v string) (resolved, why string) {
	if v != MetadataAuto {
		return v, "--metadata " + v
	}
	raw, err := os.ReadFile(filepath.Join(dataDir, backendsFile))
	if err == nil {
		var have backendsRecord
		if json.Unmarshal(raw, &have) == nil && (have.Metadata == MetadataBolt || have.Metadata == MetadataLog) {
			return have.Metadata, "auto: the data dir's " + backendsFile + " record"
		}
		// Anything else: checkBackends explains the mismatch.
		return MetadataLog, "auto: the default for a new data dir"
	}
	if exists(filepath.Join(dataDir, "metadata.db")) || exists(filepath.Join(dataDir, "objects")) {
		return MetadataBolt, "auto: an existing data dir (metadata.db) keeps bolt"
	}
	return MetadataLog, "auto: the default for a new data dir"
}

// recordBackends writes the data dir's record of its stores.
func recordBackends(dataDir string, obj objectStoreSpec, meta metadataSpec) error {
	b, err := json.Marshal(backendsRecord{ObjectStore: obj.identity(), Metadata: meta.identity()})
	if err != nil {
		return err
	}
	return writeFileAtomic(dataDir, backendsFile, append(b, '\n'))
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// writeFileAtomic writes dir/name crash-safely: temp file, fsync, rename,
// fsync of the directory.
func writeFileAtomic(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, "."+name+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
