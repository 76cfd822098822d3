package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/nereusstream/nereus-go/objectstore"
)

// ErrNoSuchBucket reports that the configured bucket does not exist. It is a
// configuration error and deliberately does not wrap objectstore.ErrNotFound.
var ErrNoSuchBucket = errors.New("s3store: bucket does not exist (configuration error)")

// Config selects the bucket and how to reach it. Zero values mean defaults.
type Config struct {
	// Bucket is required.
	Bucket string
	// Prefix, if set, is prepended to every key and stripped from listed
	// keys, so several stores can share a bucket. It must end with "/".
	Prefix string
	// Region defaults to "us-east-1".
	Region string
	// Endpoint is a custom endpoint URL (e.g. "http://127.0.0.1:7070" for an
	// S3-compatible server). Empty means AWS.
	Endpoint string
	// UsePathStyle addresses buckets as endpoint/bucket/key instead of
	// bucket.endpoint/key; S3-compatible servers usually need it.
	UsePathStyle bool
	// AccessKeyID and SecretAccessKey (plus optional SessionToken) select
	// static credentials. Both empty means the SDK's default credential
	// chain (environment, shared config, web identity, IMDS, ...).
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// HTTPClient overrides the SDK's HTTP client (tests, custom transports).
	HTTPClient *http.Client
	// MaxConflictRetries bounds how often a conditional write that got a 409
	// is re-read and retried before returning objectstore.ErrConflict
	// (default 5).
	MaxConflictRetries int
	// MaxSlowDownRetries bounds how often a mutation that got 503 SlowDown
	// (or a throttling code) is retried after backing off (default 8).
	MaxSlowDownRetries int
	// InitialBackoff is the first retry delay, doubled per retry with
	// jitter (default 50ms).
	InitialBackoff time.Duration
	// MaxBackoff caps the retry delay (default 2s).
	MaxBackoff time.Duration
	// SkipBucketCheck skips the HeadBucket call in New (which otherwise
	// fails fast on a missing bucket or bad credentials).
	SkipBucketCheck bool
}

func (c Config) withDefaults() Config {
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.MaxConflictRetries == 0 {
		c.MaxConflictRetries = 5
	}
	if c.MaxSlowDownRetries == 0 {
		c.MaxSlowDownRetries = 8
	}
	if c.InitialBackoff == 0 {
		c.InitialBackoff = 50 * time.Millisecond
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = 2 * time.Second
	}
	return c
}

// Validate reports configuration errors.
func (c Config) Validate() error {
	if c.Bucket == "" {
		return errors.New("s3store: Config.Bucket is required")
	}
	if c.Prefix != "" {
		if !strings.HasSuffix(c.Prefix, "/") {
			return fmt.Errorf("s3store: Config.Prefix %q must end with /", c.Prefix)
		}
		if err := objectstore.CheckKey(strings.TrimSuffix(c.Prefix, "/")); err != nil {
			return fmt.Errorf("s3store: Config.Prefix: %w", err)
		}
	}
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		return errors.New("s3store: set both AccessKeyID and SecretAccessKey, or neither")
	}
	if c.MaxConflictRetries < 0 || c.MaxSlowDownRetries < 0 || c.InitialBackoff < 0 || c.MaxBackoff < 0 {
		return errors.New("s3store: retry bounds and backoffs must not be negative")
	}
	return nil
}

// Store is an objectstore.ObjectStore on one S3 bucket (or a prefix of it).
type Store struct {
	cfg    Config
	client *s3.Client
}

var _ objectstore.ObjectStore = (*Store)(nil)

// New builds a client from cfg and, unless cfg.SkipBucketCheck, checks that
// the bucket exists and is reachable.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	opts := []func(*config.LoadOptions) error{config.WithRegion(cfg.Region)}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, config.WithHTTPClient(cfg.HTTPClient))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3store: load AWS config: %w", err)
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.UsePathStyle
		// Responses without a stored checksum (ranged reads, servers that
		// keep none) are normal; do not log each one.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	s := &Store{cfg: cfg, client: client}
	if !cfg.SkipBucketCheck {
		if _, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(cfg.Bucket)}); err != nil {
			if classify(err) == kindNoSuchKey || classify(err) == kindNoSuchBucket {
				return nil, fmt.Errorf("%w: %q: %v", ErrNoSuchBucket, cfg.Bucket, err)
			}
			return nil, fmt.Errorf("s3store: check bucket %q: %w", cfg.Bucket, err)
		}
	}
	return s, nil
}

// Client returns the underlying SDK client (for bucket administration in
// tests and tools).
func (s *Store) Client() *s3.Client { return s.client }

// noRetry disables the SDK's own retries. Mutations must not be retried
// blindly: a conditional PUT whose first attempt landed but whose response
// was lost would be retried into a 412 and reported as lost when it won.
// Mutations retry only on answers that prove nothing was applied (409, 503
// SlowDown), in this package's own loops.
func noRetry(o *s3.Options) { o.Retryer = aws.NopRetryer{} }

func (s *Store) fullKey(key string) string { return s.cfg.Prefix + key }

func unquote(etag *string) string {
	if etag == nil {
		return ""
	}
	return strings.Trim(*etag, `"`)
}

func quote(etag string) *string { return aws.String(`"` + etag + `"`) }

// wrapRead turns a read-path SDK error into the store's error vocabulary.
func (s *Store) wrapRead(op, key string, err error) error {
	switch classify(err) {
	case kindNoSuchKey:
		return fmt.Errorf("s3store: %s %q: %w", op, key, objectstore.ErrNotFound)
	case kindNoSuchBucket:
		return fmt.Errorf("s3store: %s %q: %w: bucket %q", op, key, ErrNoSuchBucket, s.cfg.Bucket)
	case kindBadRequest:
		return fmt.Errorf("s3store: %s %q: %w: %v", op, key, objectstore.ErrInvalidArgument, err)
	}
	if isChecksumMismatch(err) {
		return fmt.Errorf("s3store: %s %q: %w: %v", op, key, objectstore.ErrCorrupt, err)
	}
	return fmt.Errorf("s3store: %s %q: %w", op, key, err)
}

// isChecksumMismatch recognises the SDK's response-checksum validation
// failure. Its error type is unexported, so the message is the only handle.
func isChecksumMismatch(err error) bool {
	return err != nil && strings.Contains(err.Error(), "checksum did not match")
}

// notFound resolves a HEAD 404, which cannot tell a missing key from a
// missing bucket (HEAD responses have no body): it asks HeadBucket.
func (s *Store) notFound(ctx context.Context, op, key string) error {
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.cfg.Bucket)})
	if err != nil {
		if k := classify(err); k == kindNoSuchKey || k == kindNoSuchBucket {
			return fmt.Errorf("s3store: %s %q: %w: bucket %q", op, key, ErrNoSuchBucket, s.cfg.Bucket)
		}
		return fmt.Errorf("s3store: %s %q: not found, and bucket check failed: %w", op, key, err)
	}
	return fmt.Errorf("s3store: %s %q: %w", op, key, objectstore.ErrNotFound)
}

// Get implements objectstore.ObjectStore. The SDK validates the object's
// stored full-object checksum when the server returns one; a mismatch is
// objectstore.ErrCorrupt.
func (s *Store) Get(ctx context.Context, key string) ([]byte, objectstore.UpdateVersion, error) {
	if err := ctx.Err(); err != nil {
		return nil, objectstore.UpdateVersion{}, err
	}
	if err := objectstore.CheckKey(key); err != nil {
		return nil, objectstore.UpdateVersion{}, err
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket:       aws.String(s.cfg.Bucket),
		Key:          aws.String(s.fullKey(key)),
		ChecksumMode: types.ChecksumModeEnabled,
	})
	if err != nil {
		return nil, objectstore.UpdateVersion{}, s.wrapRead("get", key, err)
	}
	data, err := readBody(out.Body, out.ContentLength)
	if err != nil {
		return nil, objectstore.UpdateVersion{}, s.wrapRead("get", key, err)
	}
	return data, objectstore.UpdateVersion{ETag: unquote(out.ETag)}, nil
}

// readBody reads a response body. With a known Content-Length it reads
// straight into a slice of exactly that size (a bytes.Buffer grown to the
// length would, at EOF, grow once more for its next read and copy the
// whole body: a 16 MiB range cost 48 MiB of allocation and an extra copy).
func readBody(body io.ReadCloser, length *int64) ([]byte, error) {
	defer func() { _ = body.Close() }()
	if length == nil || *length < 0 {
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(body); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	data := make([]byte, *length)
	if n, err := io.ReadFull(body, data); err != nil {
		return nil, fmt.Errorf("short body: got %d bytes, Content-Length %d: %w", n, *length, err)
	}
	if err := readEOF(body); err != nil {
		return nil, err
	}
	return data, nil
}

// readEOF reads a body that should be exhausted up to its EOF: the SDK
// checks a response checksum (x-amz-checksum-mode) only when its reader
// reaches EOF, and reports a mismatch as that read's error.
func readEOF(body io.Reader) error {
	var one [1]byte
	for {
		n, err := body.Read(one[:])
		if n > 0 {
			return errors.New("body longer than its Content-Length")
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readBodyInto reads a response body of at most len(dst) bytes into dst.
func readBodyInto(body io.ReadCloser, length *int64, dst []byte) (int, error) {
	defer func() { _ = body.Close() }()
	if length != nil && *length >= 0 {
		if *length > int64(len(dst)) {
			return 0, fmt.Errorf("body of %d bytes for a range of %d", *length, len(dst))
		}
		n, err := io.ReadFull(body, dst[:*length])
		if err != nil {
			return 0, fmt.Errorf("short body: got %d bytes, Content-Length %d: %w", n, *length, err)
		}
		return n, readEOF(body)
	}
	n, err := io.ReadFull(body, dst)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return n, nil
	case err != nil:
		return 0, err
	}
	return n, readEOF(body)
}

// GetRange implements objectstore.ObjectStore with an HTTP Range request,
// so only the requested bytes cross the network.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := objectstore.CheckKey(key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("s3store: get range %q: %w: negative offset %d", key, objectstore.ErrInvalidArgument, offset)
	}
	if length == 0 {
		// Nothing to read, but a missing key must still be reported.
		if _, err := s.Head(ctx, key); err != nil {
			return nil, err
		}
		return []byte{}, nil
	}
	rng := "bytes=" + strconv.FormatInt(offset, 10) + "-"
	if length > 0 && offset <= (1<<62)-length {
		rng += strconv.FormatInt(offset+length-1, 10)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.cfg.Bucket),
		Key:    aws.String(s.fullKey(key)),
		Range:  aws.String(rng),
	})
	if err != nil {
		if classify(err) == kindInvalidRange {
			// The object exists and the range starts at or past its end.
			return []byte{}, nil
		}
		return nil, s.wrapRead("get range", key, err)
	}
	data, err := readBody(out.Body, out.ContentLength)
	if err != nil {
		return nil, s.wrapRead("get range", key, err)
	}
	return data, nil
}

// ReadRange implements objectstore.RangeReader: GetRange's request, its
// body read straight into dst. S3 keeps no checksum of a range, so
// CallerVerifies changes nothing here.
func (s *Store) ReadRange(ctx context.Context, key string, offset int64, dst []byte, _ objectstore.ReadRangeOptions) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := objectstore.CheckKey(key); err != nil {
		return 0, err
	}
	if offset < 0 {
		return 0, fmt.Errorf("s3store: read range %q: %w: negative offset %d", key, objectstore.ErrInvalidArgument, offset)
	}
	if len(dst) == 0 || offset > (1<<62)-int64(len(dst)) {
		b, err := s.GetRange(ctx, key, offset, int64(len(dst)))
		return copy(dst, b), err
	}
	rng := "bytes=" + strconv.FormatInt(offset, 10) + "-" + strconv.FormatInt(offset+int64(len(dst))-1, 10)
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.cfg.Bucket),
		Key:    aws.String(s.fullKey(key)),
		Range:  aws.String(rng),
	})
	if err != nil {
		if classify(err) == kindInvalidRange {
			return 0, nil // the object exists and the range starts at or past its end
		}
		return 0, s.wrapRead("read range", key, err)
	}
	n, err := readBodyInto(out.Body, out.ContentLength, dst)
	if err != nil {
		return 0, s.wrapRead("read range", key, err)
	}
	return n, nil
}

// Head implements objectstore.ObjectStore.
func (s *Store) Head(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return objectstore.ObjectInfo{}, err
	}
	if err := objectstore.CheckKey(key); err != nil {
		return objectstore.ObjectInfo{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(s.cfg.Bucket),
		Key:    aws.String(s.fullKey(key)),
	})
	if err != nil {
		if classify(err) == kindNoSuchKey {
			return objectstore.ObjectInfo{}, s.notFound(ctx, "head", key)
		}
		return objectstore.ObjectInfo{}, s.wrapRead("head", key, err)
	}
	info := objectstore.ObjectInfo{Key: key, Version: objectstore.UpdateVersion{ETag: unquote(out.ETag)}}
	if out.ContentLength != nil {
		info.Size = *out.ContentLength
	}
	if out.LastModified != nil {
		info.ModTime = *out.LastModified
	}
	return info, nil
}

// Put implements objectstore.ObjectStore: PutCreate sends If-None-Match: *,
// PutUpdate sends If-Match: "<etag>". The body carries a CRC32C that S3
// verifies on upload and stores, so later full reads are verified too.
//
// Outcomes: 412 → ErrAlreadyExists (create) or ErrPreconditionFailed
// (update); 404 NoSuchKey on an update → ErrPreconditionFailed; 409 → the
// key is re-read (HEAD): if the precondition can no longer hold the loss is
// returned, otherwise the PUT is retried after a backoff, at most
// MaxConflictRetries times, then ErrConflict; 503 SlowDown → backoff and
// retry, at most MaxSlowDownRetries times. Every other error, including
// transport errors, is returned without a sentinel: the outcome is unknown.
func (s *Store) Put(ctx context.Context, key string, data []byte, opts objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	if err := ctx.Err(); err != nil {
		return objectstore.UpdateVersion{}, err
	}
	if err := objectstore.CheckKey(key); err != nil {
		return objectstore.UpdateVersion{}, err
	}
	in := &s3.PutObjectInput{
		Bucket:            aws.String(s.cfg.Bucket),
		Key:               aws.String(s.fullKey(key)),
		ContentLength:     aws.Int64(int64(len(data))),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c,
	}
	switch opts.Mode {
	case objectstore.PutOverwrite:
	case objectstore.PutCreate:
		in.IfNoneMatch = aws.String("*")
	case objectstore.PutUpdate:
		if opts.Version.IsZero() {
			return objectstore.UpdateVersion{}, fmt.Errorf("s3store: put %q: %w: PutUpdate without a version", key, objectstore.ErrInvalidArgument)
		}
		in.IfMatch = quote(opts.Version.ETag)
	default:
		return objectstore.UpdateVersion{}, fmt.Errorf("s3store: put %q: %w: unknown put mode %d", key, objectstore.ErrInvalidArgument, opts.Mode)
	}
	lost := func() error {
		if opts.Mode == objectstore.PutCreate {
			return fmt.Errorf("s3store: put %q: %w", key, objectstore.ErrAlreadyExists)
		}
		return fmt.Errorf("s3store: put %q: %w", key, objectstore.ErrPreconditionFailed)
	}
	conflicts, slowdowns := 0, 0
	for {
		in.Body = bytes.NewReader(data)
		out, err := s.client.PutObject(ctx, in, noRetry)
		if err == nil {
			return objectstore.UpdateVersion{ETag: unquote(out.ETag)}, nil
		}
		switch kind := classify(err); kind {
		case kindPrecondition:
			return objectstore.UpdateVersion{}, lost()
		case kindNoSuchKey:
			if opts.Mode == objectstore.PutUpdate {
				// If-Match on a missing key: the object is not at the version.
				return objectstore.UpdateVersion{}, lost()
			}
			return objectstore.UpdateVersion{}, s.wrapMutation("put", key, err)
		case kindConflict:
			if conflicts >= s.cfg.MaxConflictRetries {
				return objectstore.UpdateVersion{}, fmt.Errorf("s3store: put %q: %w (after %d retries): %v", key, objectstore.ErrConflict, conflicts, err)
			}
			conflicts++
			if opts.Mode != objectstore.PutOverwrite {
				holds, rerr := s.preconditionMayHold(ctx, key, opts)
				if rerr != nil {
					// Nothing was applied (409), but we cannot say more.
					return objectstore.UpdateVersion{}, fmt.Errorf("s3store: put %q: %w; re-read failed: %v", key, objectstore.ErrConflict, rerr)
				}
				if !holds {
					return objectstore.UpdateVersion{}, lost()
				}
			}
			if err := backoff(ctx, s.cfg.InitialBackoff, s.cfg.MaxBackoff, conflicts-1); err != nil {
				return objectstore.UpdateVersion{}, fmt.Errorf("s3store: put %q: %w (cancelled while backing off): %v", key, objectstore.ErrConflict, err)
			}
		case kindSlowDown:
			if slowdowns >= s.cfg.MaxSlowDownRetries {
				return objectstore.UpdateVersion{}, fmt.Errorf("s3store: put %q: still throttled after %d retries: %w", key, slowdowns, err)
			}
			if err := backoff(ctx, s.cfg.InitialBackoff, s.cfg.MaxBackoff, slowdowns); err != nil {
				return objectstore.UpdateVersion{}, err
			}
			slowdowns++
		default:
			return objectstore.UpdateVersion{}, s.wrapMutation("put", key, err)
		}
	}
}

// wrapMutation reports a mutation error that proves nothing (or a
// configuration error) without any objectstore sentinel, so Classify says
// unknown, except for the rejections that prove nothing was applied.
func (s *Store) wrapMutation(op, key string, err error) error {
	switch classify(err) {
	case kindNoSuchBucket:
		return fmt.Errorf("s3store: %s %q: %w: bucket %q: %v", op, key, ErrNoSuchBucket, s.cfg.Bucket, err)
	case kindBadRequest:
		return fmt.Errorf("s3store: %s %q: %w: %v", op, key, objectstore.ErrInvalidArgument, err)
	}
	return fmt.Errorf("s3store: %s %q: outcome unknown: %w", op, key, err)
}

// preconditionMayHold re-reads key after a 409 and reports whether the
// write's precondition can still succeed (retrying makes sense).
func (s *Store) preconditionMayHold(ctx context.Context, key string, opts objectstore.PutOptions) (bool, error) {
	info, err := s.Head(ctx, key)
	switch {
	case errors.Is(err, objectstore.ErrNotFound):
		return opts.Mode == objectstore.PutCreate, nil
	case err != nil:
		return false, err
	case opts.Mode == objectstore.PutCreate:
		return false, nil
	default:
		return info.Version.Equal(opts.Version), nil
	}
}

// Delete implements objectstore.ObjectStore. S3 deletes of missing keys
// succeed silently, so an unconditional Delete first HEADs the key to report
// ErrNotFound; a conditional Delete sends If-Match: "<etag>" and maps 412 →
// ErrPreconditionFailed, 404 → ErrNotFound, 409 → re-read and retry (then
// ErrConflict), 503 SlowDown → back off and retry.
func (s *Store) Delete(ctx context.Context, key string, ifVersion *objectstore.UpdateVersion) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := objectstore.CheckKey(key); err != nil {
		return err
	}
	in := &s3.DeleteObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(s.fullKey(key))}
	if ifVersion == nil {
		if _, err := s.Head(ctx, key); err != nil {
			return err
		}
		// Unconditional deletes are idempotent, so the SDK's retries are
		// safe here.
		if _, err := s.client.DeleteObject(ctx, in); err != nil {
			return s.wrapMutation("delete", key, err)
		}
		return nil
	}
	if ifVersion.IsZero() {
		return fmt.Errorf("s3store: delete %q: %w: empty version", key, objectstore.ErrInvalidArgument)
	}
	// S3 servers differ on If-Match for a missing key (AWS: 404; some
	// S3-compatible servers: 204), so check first. A concurrent delete
	// between this HEAD and the DELETE can make both deleters see success;
	// the object is gone either way.
	info, err := s.Head(ctx, key)
	if err != nil {
		return err
	}
	if !info.Version.Equal(*ifVersion) {
		return fmt.Errorf("s3store: delete %q: %w", key, objectstore.ErrPreconditionFailed)
	}
	in.IfMatch = quote(ifVersion.ETag)
	conflicts, slowdowns := 0, 0
	for {
		_, err := s.client.DeleteObject(ctx, in, noRetry)
		if err == nil {
			return nil
		}
		switch classify(err) {
		case kindPrecondition:
			return fmt.Errorf("s3store: delete %q: %w", key, objectstore.ErrPreconditionFailed)
		case kindNoSuchKey:
			return fmt.Errorf("s3store: delete %q: %w", key, objectstore.ErrNotFound)
		case kindConflict:
			if conflicts >= s.cfg.MaxConflictRetries {
				return fmt.Errorf("s3store: delete %q: %w (after %d retries): %v", key, objectstore.ErrConflict, conflicts, err)
			}
			conflicts++
			info, herr := s.Head(ctx, key)
			switch {
			case errors.Is(herr, objectstore.ErrNotFound):
				return herr
			case herr != nil:
				return fmt.Errorf("s3store: delete %q: %w; re-read failed: %v", key, objectstore.ErrConflict, herr)
			case !info.Version.Equal(*ifVersion):
				return fmt.Errorf("s3store: delete %q: %w", key, objectstore.ErrPreconditionFailed)
			}
			if err := backoff(ctx, s.cfg.InitialBackoff, s.cfg.MaxBackoff, conflicts-1); err != nil {
				return fmt.Errorf("s3store: delete %q: %w (cancelled while backing off): %v", key, objectstore.ErrConflict, err)
			}
		case kindSlowDown:
			if slowdowns >= s.cfg.MaxSlowDownRetries {
				return fmt.Errorf("s3store: delete %q: still throttled after %d retries: %w", key, slowdowns, err)
			}
			if err := backoff(ctx, s.cfg.InitialBackoff, s.cfg.MaxBackoff, slowdowns); err != nil {
				return err
			}
			slowdowns++
		default:
			return s.wrapMutation("delete", key, err)
		}
	}
}

// List implements objectstore.ObjectStore with ListObjectsV2, following
// continuation tokens page by page (S3 returns keys in UTF-8 binary order).
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[objectstore.ObjectInfo, error] {
	return func(yield func(objectstore.ObjectInfo, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(objectstore.ObjectInfo{}, err)
			return
		}
		pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{
			Bucket: aws.String(s.cfg.Bucket),
			Prefix: aws.String(s.fullKey(prefix)),
		})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
					yield(objectstore.ObjectInfo{}, err)
					return
				}
				yield(objectstore.ObjectInfo{}, s.wrapRead("list", prefix, err))
				return
			}
			for _, o := range page.Contents {
				if err := ctx.Err(); err != nil {
					yield(objectstore.ObjectInfo{}, err)
					return
				}
				info := objectstore.ObjectInfo{
					Key:     strings.TrimPrefix(aws.ToString(o.Key), s.cfg.Prefix),
					Version: objectstore.UpdateVersion{ETag: unquote(o.ETag)},
				}
				if o.Size != nil {
					info.Size = *o.Size
				}
				if o.LastModified != nil {
					info.ModTime = *o.LastModified
				}
				if !yield(info, nil) {
					return
				}
			}
		}
	}
}
