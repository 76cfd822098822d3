package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Error is a non-2xx answer from the server.
type Error struct {
	Status  int
	Code    Code
	Message string
	// Commit is "not_committed" or "unknown" for failed appends.
	Commit string
}

func (e *Error) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return fmt.Sprintf("HTTP %d %s", e.Status, e.Code)
}

// HasCode reports whether err is an *Error with the given code.
func HasCode(err error, code Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// Client talks to one Nereus admin endpoint. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	http  *http.Client
	token string
}

// WithToken returns a client that sends token as a bearer credential
// (servers running with --admin-auth token). The token is never logged.
func (c *Client) WithToken(token string) *Client {
	cp := *c
	cp.token = token
	return &cp
}

// NewClient returns a client for the server at base (e.g.
// "http://127.0.0.1:8080"; a bare host:port gets "http://"). hc may be nil
// (a client with no overall timeout: long polls bound themselves).
func NewClient(base string, hc *http.Client) (*Client, error) {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil {
		return nil, fmt.Errorf("bad server URL %q: %w", base, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("bad server URL %q: scheme must be http or https", base)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("bad server URL %q: no host", base)
	}
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{base: u, http: hc}, nil
}

// BaseURL returns the server URL the client talks to.
func (c *Client) BaseURL() string { return c.base.String() }

func (c *Client) streamPath(name string, suffix string) string {
	return "/v1/streams/" + url.PathEscape(name) + suffix
}

// do sends a request and decodes a 2xx JSON body into out (when non-nil).
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	// path is already escaped (stream names may contain '/', sent as %2F).
	u := *c.base
	u.RawPath = c.base.EscapedPath() + path
	unescaped, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return fmt.Errorf("bad request path %q: %w", path, err)
	}
	u.Path = unescaped
	if query != nil {
		u.RawQuery = query.Encode()
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach nereus server at %s: %w", c.base, unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var eb ErrorBody
		if json.Unmarshal(raw, &eb) == nil && eb.Error != "" {
			return &Error{Status: resp.StatusCode, Code: eb.Code, Message: eb.Error, Commit: eb.Commit}
		}
		msg := strings.TrimSpace(string(raw))
		if msg == "" {
			msg = resp.Status
		}
		return &Error{Status: resp.StatusCode, Code: CodeInternal, Message: fmt.Sprintf("server answered %s: %s", resp.Status, msg)}
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("bad response from %s %s: %w", method, path, err)
	}
	return nil
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Health returns GET /healthz. A draining server answers 503 with a body;
// Health returns that body together with an *Error.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	err := c.do(ctx, http.MethodGet, "/healthz", nil, nil, &h)
	return h, err
}

// ClusterStatus returns GET /v1/cluster (limit <= 0: the server's default
// scan limit).
func (c *Client) ClusterStatus(ctx context.Context, limit int) (ClusterStatus, error) {
	var q url.Values
	if limit > 0 {
		q = url.Values{"limit": {strconv.Itoa(limit)}}
	}
	var out ClusterStatus
	err := c.do(ctx, http.MethodGet, "/v1/cluster", q, nil, &out)
	return out, err
}

// CreateStream creates a stream. If the name is taken the error has code
// STREAM_EXISTS.
func (c *Client) CreateStream(ctx context.Context, req CreateStreamRequest) (StreamInfo, error) {
	var info StreamInfo
	err := c.do(ctx, http.MethodPost, "/v1/streams", nil, req, &info)
	return info, err
}

// ListStreams returns one page of streams whose names start with prefix
// and sort after `after`.
func (c *Client) ListStreams(ctx context.Context, prefix, after string, limit int) (ListStreamsResponse, error) {
	q := url.Values{}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var resp ListStreamsResponse
	err := c.do(ctx, http.MethodGet, "/v1/streams", q, nil, &resp)
	return resp, err
}

// DescribeStream returns one stream's current head.
func (c *Client) DescribeStream(ctx context.Context, name string) (StreamInfo, error) {
	var info StreamInfo
	err := c.do(ctx, http.MethodGet, c.streamPath(name, ""), nil, nil, &info)
	return info, err
}

// Append appends entries atomically. On error, an *Error with Commit
// "unknown" (or a transport error) means the append may have committed.
func (c *Client) Append(ctx context.Context, name string, req AppendRequest) (AppendResponse, error) {
	var resp AppendResponse
	err := c.do(ctx, http.MethodPost, c.streamPath(name, "/entries"), nil, req, &resp)
	return resp, err
}

// ReadOptions bounds a read. Zero values take the server's defaults.
type ReadOptions struct {
	// From is the offset to read from; nil means the stream's start.
	From *int64
	// Limit bounds the number of entries (server default 1000, max 10000).
	Limit int
	// MaxBytes bounds the payload bytes (at least one entry is returned).
	MaxBytes int
	// Wait long-polls up to this long when nothing is available (max 60s).
	Wait time.Duration
}

// Read returns committed entries.
func (c *Client) Read(ctx context.Context, name string, opts ReadOptions) (ReadResponse, error) {
	q := url.Values{}
	if opts.From != nil {
		q.Set("from", strconv.FormatInt(*opts.From, 10))
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.MaxBytes > 0 {
		q.Set("maxBytes", strconv.Itoa(opts.MaxBytes))
	}
	if opts.Wait > 0 {
		q.Set("wait", opts.Wait.String())
	}
	var resp ReadResponse
	err := c.do(ctx, http.MethodGet, c.streamPath(name, "/entries"), q, nil, &resp)
	return resp, err
}

// Trim advances the stream's start offset to `to`.
func (c *Client) Trim(ctx context.Context, name string, to int64) (StreamInfo, error) {
	var info StreamInfo
	err := c.do(ctx, http.MethodPost, c.streamPath(name, "/trim"), nil, TrimRequest{To: to}, &info)
	return info, err
}

// SetRetention changes the stream's retention.
func (c *Client) SetRetention(ctx context.Context, name string, r Retention) (StreamInfo, error) {
	var info StreamInfo
	err := c.do(ctx, http.MethodPut, c.streamPath(name, "/retention"), nil, RetentionRequest{Retention: r}, &info)
	return info, err
}

// RebuildIndex repairs the stream's offset index from the head's commit
// chain and, for lost entries, from the runs stored in the WAL.
func (c *Client) RebuildIndex(ctx context.Context, name string) (RebuildIndexResult, error) {
	var res RebuildIndexResult
	err := c.do(ctx, http.MethodPost, c.streamPath(name, "/rebuild-index"), nil, nil, &res)
	return res, err
}

// Seal stops further appends to the stream.
func (c *Client) Seal(ctx context.Context, name string) (StreamInfo, error) {
	var info StreamInfo
	err := c.do(ctx, http.MethodPost, c.streamPath(name, "/seal"), nil, nil, &info)
	return info, err
}

// DeleteStream deletes the stream; its name becomes free.
func (c *Client) DeleteStream(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, c.streamPath(name, ""), nil, nil, nil)
}

// ListKafkaScramUsers returns every Kafka user with SCRAM credentials.
func (c *Client) ListKafkaScramUsers(ctx context.Context) ([]KafkaScramUser, error) {
	var out []KafkaScramUser
	err := c.do(ctx, http.MethodGet, "/v1/kafka/scram-users", nil, nil, &out)
	return out, err
}

// SetKafkaScram creates or replaces a user's SCRAM credential.
func (c *Client) SetKafkaScram(ctx context.Context, user string, req SetKafkaScramRequest) error {
	return c.do(ctx, http.MethodPut, "/v1/kafka/scram-users/"+url.PathEscape(user), nil, req, nil)
}

// DeleteKafkaScram removes a user's credential for mechanism ("" removes
// every mechanism of the user).
func (c *Client) DeleteKafkaScram(ctx context.Context, user, mechanism string) error {
	q := url.Values{}
	if mechanism != "" {
		q.Set("mechanism", mechanism)
	}
	return c.do(ctx, http.MethodDelete, "/v1/kafka/scram-users/"+url.PathEscape(user), q, nil, nil)
}

// GCStatus returns the answering node's last GC pass, what it keeps and
// why, and its recent deletions.
func (c *Client) GCStatus(ctx context.Context) (GCStatus, error) {
	var st GCStatus
	err := c.do(ctx, http.MethodGet, "/v1/gc", nil, nil, &st)
	return st, err
}

// RunGC runs one GC pass on the answering node now and returns its report.
func (c *Client) RunGC(ctx context.Context) (GCStatus, error) {
	var st GCStatus
	err := c.do(ctx, http.MethodPost, "/v1/gc/run", nil, nil, &st)
	return st, err
}
