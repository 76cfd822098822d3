package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/nereusstream/nereus-go/adminapi"
)

const defaultServer = "http://127.0.0.1:8080"

type streamOpts struct {
	server  string
	timeout time.Duration
	// Credentials for servers with --admin-auth: a bearer token from a
	// file (or NEREUS_TOKEN_FILE), a CA to trust for https://, and a client
	// certificate.
	tokenFile, caFile, certFile, keyFile string
}

// addConnFlags adds --server, --timeout and the credential flags.
func (o *streamOpts) addConnFlags(cmd *cobra.Command, timeout time.Duration) {
	cmd.PersistentFlags().StringVar(&o.server, "server", "", "server URL (env NEREUS_SERVER, default "+defaultServer+")")
	cmd.PersistentFlags().DurationVar(&o.timeout, "timeout", timeout, "timeout of each request")
	cmd.PersistentFlags().StringVar(&o.tokenFile, "token-file", "", "file with a bearer token for --admin-auth servers (env NEREUS_TOKEN_FILE)")
	cmd.PersistentFlags().StringVar(&o.caFile, "ca-file", "", "PEM CA to trust for an https:// server (env NEREUS_CA_FILE)")
	cmd.PersistentFlags().StringVar(&o.certFile, "cert-file", "", "PEM client certificate for mTLS (env NEREUS_CERT_FILE)")
	cmd.PersistentFlags().StringVar(&o.keyFile, "key-file", "", "PEM key of --cert-file (env NEREUS_KEY_FILE)")
}

func (o *streamOpts) client(e env) (*adminapi.Client, error) {
	pick := func(flag, envName, def string) string {
		if flag != "" {
			return flag
		}
		if v, ok := e.lookupEnv(envName); ok && v != "" {
			return v
		}
		return def
	}
	url := pick(o.server, "NEREUS_SERVER", defaultServer)
	hc := &http.Client{}
	caFile, certFile, keyFile := pick(o.caFile, "NEREUS_CA_FILE", ""), pick(o.certFile, "NEREUS_CERT_FILE", ""), pick(o.keyFile, "NEREUS_KEY_FILE", "")
	if caFile != "" || certFile != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if caFile != "" {
			pem, err := os.ReadFile(caFile)
			if err != nil {
				return nil, fmt.Errorf("--ca-file: %w", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", caFile)
			}
		}
		if certFile != "" {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, fmt.Errorf("--cert-file/--key-file: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		hc.Transport = &http.Transport{TLSClientConfig: tc}
	}
	c, err := adminapi.NewClient(url, hc)
	if err != nil {
		return nil, err
	}
	if f := pick(o.tokenFile, "NEREUS_TOKEN_FILE", ""); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		c = c.WithToken(strings.TrimSpace(string(b)))
	}
	return c, nil
}

// reqCtx bounds one request (long polls add their wait on top).
func (o *streamOpts) reqCtx(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, o.timeout+extra)
}

func newStreamCmd(e env) *cobra.Command {
	o := &streamOpts{}
	cmd := &cobra.Command{
		Use:     "stream",
		Aliases: []string{"streams"},
		Short:   "Create, inspect, append to and read streams on a running server",
		Long: `Create, inspect, append to and read streams on a running Nereus server.

The server is --server, or NEREUS_SERVER, or ` + defaultServer + `.`,
	}
	o.addConnFlags(cmd, 30*time.Second)
	cmd.AddCommand(
		newCreateCmd(e, o), newListCmd(e, o), newDescribeCmd(e, o), newAppendCmd(e, o), newReadCmd(e, o),
		newTailCmd(e, o), newTrimCmd(e, o), newRetentionCmd(e, o), newSealCmd(e, o), newDeleteCmd(e, o), newRebuildIndexCmd(e, o),
	)
	return cmd
}

func checkFormat(f string) error {
	if f != "text" && f != "json" {
		return fmt.Errorf("--format %q: want text or json", f)
	}
	return nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printInfo(w io.Writer, info adminapi.StreamInfo) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "name:\t%s\n", info.Name)
	fmt.Fprintf(tw, "id:\t%s\n", info.ID)
	fmt.Fprintf(tw, "profile:\t%s\n", info.Profile)
	fmt.Fprintf(tw, "state:\t%s\n", info.State)
	fmt.Fprintf(tw, "offsets:\t[%d, %d)  (%d readable)\n", info.StartOffset, info.EndOffset, info.EndOffset-info.StartOffset)
	fmt.Fprintf(tw, "committed bytes:\t%d  (%d retained)\n", info.CommittedBytes, info.RetainedBytes)
	if info.MaterializedThrough > info.StartOffset {
		fmt.Fprintf(tw, "generations:\toffsets [%d, %d) served from generation objects, the rest from the WAL\n", info.StartOffset, info.MaterializedThrough)
	}
	fmt.Fprintf(tw, "created:\t%s\n", info.CreatedAt.Format(time.RFC3339))
	if info.Retention.TimeMs > 0 || info.Retention.Bytes > 0 {
		fmt.Fprintf(tw, "retention:\ttime=%s bytes=%d\n", time.Duration(info.Retention.TimeMs)*time.Millisecond, info.Retention.Bytes)
	}
	if s := info.Session; s != nil {
		fmt.Fprintf(tw, "session:\tepoch %d, writer %s, expires %s\n", s.Epoch, s.WriterID, s.Expires.Format(time.RFC3339))
	}
	for k, v := range info.Attributes {
		fmt.Fprintf(tw, "attribute:\t%s=%s\n", k, v)
	}
	tw.Flush()
}

func newCreateCmd(e env, o *streamOpts) *cobra.Command {
	var profile, format string
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a stream (its storage profile is fixed at creation)",
		Args:  argsWithHelp(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			return o.call(cmd, e, func(ctx context.Context, c *adminapi.Client) error {
				info, err := c.CreateStream(ctx, adminapi.CreateStreamRequest{Name: args[0], Profile: profile})
				if err != nil {
					return err
				}
				if format == "json" {
					return printJSON(e.stdout, info)
				}
				fmt.Fprintf(e.stdout, "created stream %s (id %s, profile %s)\n", info.Name, info.ID, info.Profile)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&profile, "profile", "", "storage profile (default OBJECT_WAL_ASYNC_OBJECT; also OBJECT_WAL_SYNC_OBJECT, BOOKKEEPER_WAL_ONLY, ...)")
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

func newListCmd(e env, o *streamOpts) *cobra.Command {
	var prefix, format string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List streams",
		Args:  argsWithHelp(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			c, err := o.client(e)
			if err != nil {
				return err
			}
			var all []adminapi.StreamInfo
			after := ""
			for {
				ctx, cancel := o.reqCtx(cmd.Context(), 0)
				page, err := c.ListStreams(ctx, prefix, after, 0)
				cancel()
				if err != nil {
					return err
				}
				all = append(all, page.Streams...)
				if page.Next == "" {
					break
				}
				after = page.Next
			}
			if format == "json" {
				if all == nil {
					all = []adminapi.StreamInfo{}
				}
				return printJSON(e.stdout, all)
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPROFILE\tSTATE\tSTART\tEND")
			for _, s := range all {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", s.Name, s.Profile, s.State, s.StartOffset, s.EndOffset)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "only streams whose names start with this")
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

func newDescribeCmd(e env, o *streamOpts) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a stream's profile, state and offsets",
		Args:  argsWithHelp(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			return o.call(cmd, e, func(ctx context.Context, c *adminapi.Client) error {
				info, err := c.DescribeStream(ctx, args[0])
				if err != nil {
					return err
				}
				if format == "json" {
					return printJSON(e.stdout, info)
				}
				printInfo(e.stdout, info)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

// Batching bounds for append: one request carries at most this many lines
// or payload bytes.
const (
	appendBatchEntries = 1000
	appendBatchBytes   = 4 << 20
	maxLineBytes       = 16 << 20
	// progressMinBytes: inputs smaller than this get no progress bar;
	// progressMinOffsets: nor do reads of fewer offsets.
	progressMinBytes   = 1 << 20
	progressMinOffsets = 10000
)

func newAppendCmd(e env, o *streamOpts) *cobra.Command {
	var file string
	var quiet bool
	var batch int
	cmd := &cobra.Command{
		Use:   "append NAME",
		Short: "Append one entry per input line (stdin or --file); prints each entry's offset",
		Long: `Append one entry per input line, read from stdin or --file.

Lines are batched into requests (each request commits atomically). Each
entry's assigned offset is printed on its own line, in input order. On a
terminal, large input shows a progress bar on stderr.`,
		Args: argsWithHelp(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if batch <= 0 {
				return fmt.Errorf("--batch %d: must be positive", batch)
			}
			c, err := o.client(e)
			if err != nil {
				return err
			}
			in := e.stdin
			size := int64(-1)
			if file != "" && file != "-" {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
				if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
					size = st.Size()
				}
			} else if f, ok := in.(*os.File); ok {
				if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
					size = st.Size()
				}
			}
			var bar *progressbar.ProgressBar
			interactiveIn := false
			if f, ok := in.(*os.File); ok && isTerminal(f) {
				interactiveIn = true
			}
			if e.isTerminal(e.stderr) && !interactiveIn && (size < 0 || size >= progressMinBytes) {
				bar = progressbar.NewOptions64(size,
					progressbar.OptionSetWriter(e.stderr),
					progressbar.OptionSetDescription("appending "+args[0]),
					progressbar.OptionShowBytes(true),
					progressbar.OptionShowCount(),
					progressbar.OptionThrottle(100*time.Millisecond),
					progressbar.OptionClearOnFinish(),
					progressbar.OptionSpinnerType(14),
				)
				in = io.TeeReader(in, bar)
			}
			out := bufio.NewWriter(e.stdout)
			defer out.Flush()
			sum, err := appendLines(cmd.Context(), c, o, args[0], in, batch, func(offsets []int64) error {
				if quiet {
					return nil
				}
				for _, off := range offsets {
					out.WriteString(strconv.FormatInt(off, 10))
					out.WriteByte('\n')
				}
				return nil
			})
			if bar != nil {
				_ = bar.Finish()
			}
			out.Flush()
			if err != nil {
				return err
			}
			if e.isTerminal(e.stderr) {
				if sum.entries == 0 {
					fmt.Fprintln(e.stderr, "no input lines; nothing appended")
				} else {
					fmt.Fprintf(e.stderr, "appended %d entries to %s at offsets [%d, %d)\n", sum.entries, args[0], sum.first, sum.end)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "read lines from this file instead of stdin")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "do not print offsets")
	cmd.Flags().IntVar(&batch, "batch", appendBatchEntries, "maximum lines per request")
	return cmd
}

type appendSummary struct {
	entries    int64
	first, end int64
}

// appendLines reads lines from in, appends them in batches, and reports
// each batch's offsets through emit, in order. On failure the error says
// how far it got and whether the failing batch may have committed.
func appendLines(ctx context.Context, c *adminapi.Client, o *streamOpts, name string, in io.Reader,
	batchMax int, emit func([]int64) error) (appendSummary, error) {
	var sum appendSummary
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), maxLineBytes)
	var entries []adminapi.AppendEntry
	batchBytes := 0
	firstLine := int64(1)
	flush := func() error {
		if len(entries) == 0 {
			return nil
		}
		rctx, cancel := o.reqCtx(ctx, 0)
		resp, err := c.Append(rctx, name, adminapi.AppendRequest{Entries: entries})
		cancel()
		lastLine := firstLine + int64(len(entries)) - 1
		if err != nil {
			state := "were not committed"
			var ae *adminapi.Error
			if !errors.As(err, &ae) || ae.Commit == "unknown" || ae.Code == adminapi.CodeCommitUnknown {
				state = "may or may not have been committed (read the stream to check)"
			}
			done := ""
			if sum.entries > 0 {
				done = fmt.Sprintf("; lines 1-%d were committed at offsets [%d, %d)", firstLine-1, sum.first, sum.end)
			}
			return fmt.Errorf("append to %s failed: %v; lines %d-%d %s%s", name, err, firstLine, lastLine, state, done)
		}
		if sum.entries == 0 {
			sum.first = resp.Start
		}
		sum.entries += int64(len(entries))
		sum.end = resp.End
		firstLine = lastLine + 1
		entries, batchBytes = entries[:0], 0
		return emit(resp.Offsets)
	}
	for sc.Scan() {
		line := sc.Bytes()
		line = []byte(strings.TrimSuffix(string(line), "\r"))
		var ent adminapi.AppendEntry
		if utf8.Valid(line) {
			s := string(line)
			ent.Text = &s
		} else {
			ent.Payload = append([]byte(nil), line...)
		}
		entries = append(entries, ent)
		batchBytes += len(line)
		if len(entries) >= batchMax || batchBytes >= appendBatchBytes {
			if err := flush(); err != nil {
				return sum, err
			}
		}
		if err := ctx.Err(); err != nil {
			return sum, err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("line %d is longer than %d bytes", firstLine+int64(len(entries)), maxLineBytes)
		}
		// Lines before the bad one are still appended, so the output
		// matches what was committed.
		if ferr := flush(); ferr != nil {
			return sum, ferr
		}
		return sum, fmt.Errorf("reading input: %w", err)
	}
	return sum, flush()
}

type jsonEntry struct {
	Offset      int64   `json:"offset"`
	RecordCount uint32  `json:"recordCount"`
	Timestamp   int64   `json:"timestamp"`
	Payload     []byte  `json:"payload"`
	Text        *string `json:"text,omitempty"`
}

// entryPrinter writes entries in the chosen format: text is the raw payload
// plus a newline; json is one object per line (payload base64, plus text
// when the payload is valid UTF-8).
func entryPrinter(w *bufio.Writer, format string) func(adminapi.ReadEntry) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		return func(e adminapi.ReadEntry) error {
			je := jsonEntry{Offset: e.Offset, RecordCount: e.RecordCount, Timestamp: e.Timestamp, Payload: e.Payload}
			if utf8.Valid(e.Payload) {
				s := string(e.Payload)
				je.Text = &s
			}
			return enc.Encode(je)
		}
	}
	return func(e adminapi.ReadEntry) error {
		w.Write(e.Payload)
		return w.WriteByte('\n')
	}
}

func newReadCmd(e env, o *streamOpts) *cobra.Command {
	var from int64
	var limit int
	var format string
	cmd := &cobra.Command{
		Use:   "read NAME",
		Short: "Print entries from an offset up to the current end (text: one payload per line)",
		Args:  argsWithHelp(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if limit < 0 {
				return fmt.Errorf("--limit %d: must not be negative", limit)
			}
			c, err := o.client(e)
			if err != nil {
				return err
			}
			var fromp *int64
			if cmd.Flags().Changed("from") {
				if from < 0 {
					return fmt.Errorf("--from %d: must not be negative", from)
				}
				fromp = &from
			}
			out := bufio.NewWriter(e.stdout)
			defer out.Flush()
			printEntry := entryPrinter(out, format)
			printed := 0
			// A long read into a file or pipe shows its progress (in
			// offsets) on a terminal's stderr.
			var bar *progressbar.ProgressBar
			var barFirst int64
			defer func() {
				if bar != nil {
					_ = bar.Finish()
				}
			}()
			for limit == 0 || printed < limit {
				page := 1000
				if limit > 0 {
					page = min(page, limit-printed)
				}
				ctx, cancel := o.reqCtx(cmd.Context(), 0)
				resp, err := c.Read(ctx, args[0], adminapi.ReadOptions{From: fromp, Limit: page})
				cancel()
				if err != nil {
					return err
				}
				for _, ent := range resp.Entries {
					if err := printEntry(ent); err != nil {
						return err
					}
					printed++
				}
				if bar == nil && len(resp.Entries) > 0 && e.isTerminal(e.stderr) && !e.isTerminal(e.stdout) {
					barFirst = resp.Entries[0].Offset
					total := resp.EndOffset - barFirst
					if limit > 0 {
						total = min(total, int64(limit))
					}
					if total >= progressMinOffsets {
						bar = progressbar.NewOptions64(total,
							progressbar.OptionSetWriter(e.stderr),
							progressbar.OptionSetDescription("reading "+args[0]),
							progressbar.OptionShowCount(),
							progressbar.OptionThrottle(100*time.Millisecond),
							progressbar.OptionClearOnFinish(),
						)
					}
				}
				if bar != nil {
					_ = bar.Set64(min(resp.Next-barFirst, bar.GetMax64()))
				}
				next := resp.Next
				fromp = &next
				if len(resp.Entries) == 0 || next >= resp.EndOffset {
					break
				}
			}
			return out.Flush()
		},
	}
	cmd.Flags().Int64Var(&from, "from", 0, "first offset to read (default: the stream's start)")
	cmd.Flags().IntVar(&limit, "limit", 0, "maximum entries to print (0: up to the current end)")
	cmd.Flags().StringVar(&format, "format", "text", "output format: text (one payload per line) or json (one object per line)")
	return cmd
}

func newTailCmd(e env, o *streamOpts) *cobra.Command {
	var from int64
	var format string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "tail NAME",
		Short: "Follow a stream: print new entries as they commit (Ctrl-C stops)",
		Args:  argsWithHelp(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			if wait <= 0 || wait > 60*time.Second {
				return fmt.Errorf("--wait %v: must be in (0, 60s]", wait)
			}
			c, err := o.client(e)
			if err != nil {
				return err
			}
			ctx, stop := e.signalContext(cmd.Context())
			defer stop()
			next := from
			if !cmd.Flags().Changed("from") {
				rctx, cancel := o.reqCtx(ctx, 0)
				info, err := c.DescribeStream(rctx, args[0])
				cancel()
				if err != nil {
					return err
				}
				next = info.EndOffset
			}
			out := bufio.NewWriter(e.stdout)
			defer out.Flush()
			printEntry := entryPrinter(out, format)
			for {
				rctx, cancel := o.reqCtx(ctx, wait)
				resp, err := c.Read(rctx, args[0], adminapi.ReadOptions{From: &next, Wait: wait})
				cancel()
				if ctx.Err() != nil {
					return nil // interrupted: a normal end of tail
				}
				if err != nil {
					if adminapi.HasCode(err, adminapi.CodeOffsetOutOfRange) {
						// Trimmed past our position: continue at the start.
						if info, derr := c.DescribeStream(ctx, args[0]); derr == nil && next < info.StartOffset {
							fmt.Fprintf(e.stderr, "nereus: offsets [%d, %d) were trimmed; continuing at %d\n", next, info.StartOffset, info.StartOffset)
							next = info.StartOffset
							continue
						}
					}
					return err
				}
				for _, ent := range resp.Entries {
					if err := printEntry(ent); err != nil {
						return err
					}
				}
				if err := out.Flush(); err != nil {
					return err
				}
				next = resp.Next
			}
		},
	}
	cmd.Flags().Int64Var(&from, "from", 0, "first offset to print (default: the current end, i.e. only new entries)")
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "long-poll time per request")
	return cmd
}

func newTrimCmd(e env, o *streamOpts) *cobra.Command {
	var to int64
	cmd := &cobra.Command{
		Use:   "trim NAME --to N",
		Short: "Advance the stream's start offset to N (older entries become unreadable)",
		Args:  argsWithHelp(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("to") {
				return errors.New("trim needs --to N")
			}
			if to < 0 {
				return fmt.Errorf("--to %d: must not be negative", to)
			}
			return o.call(cmd, e, func(ctx context.Context, c *adminapi.Client) error {
				info, err := c.Trim(ctx, args[0], to)
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "trimmed %s: readable offsets now [%d, %d)\n", info.Name, info.StartOffset, info.EndOffset)
				return nil
			})
		},
	}
	cmd.Flags().Int64Var(&to, "to", 0, "new start offset")
	return cmd
}

func newRebuildIndexCmd(e env, o *streamOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "rebuild-index NAME",
		Short: "Repair a stream's offset and generation indexes from its commit chain, the WAL's runs and the generation objects",
		Args:  argsWithHelp(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.call(cmd, e, func(ctx context.Context, c *adminapi.Client) error {
				res, err := c.RebuildIndex(ctx, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "%s: %d gaps, %d runs scanned, %d index entries rebuilt, %d pending commits republished\n",
					args[0], res.Gaps, res.Scanned, res.Rebuilt, res.Republished)
				fmt.Fprintf(e.stdout, "%s: %d generation gaps, %d generation objects scanned, %d generation records rebuilt\n",
					args[0], res.GenerationGaps, res.GenerationsScanned, res.GenerationsRebuilt)
				return nil
			})
		},
	}
}

func newSealCmd(e env, o *streamOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "seal NAME",
		Short: "Stop all further appends to a stream (reads continue)",
		Args:  argsWithHelp(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.call(cmd, e, func(ctx context.Context, c *adminapi.Client) error {
				info, err := c.Seal(ctx, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "sealed %s at offset %d\n", info.Name, info.EndOffset)
				return nil
			})
		},
	}
}

func newDeleteCmd(e env, o *streamOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a stream (its name becomes free)",
		Args:  argsWithHelp(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.call(cmd, e, func(ctx context.Context, c *adminapi.Client) error {
				if err := c.DeleteStream(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(e.stdout, "deleted %s\n", args[0])
				return nil
			})
		},
	}
}

// call runs one admin request on the server (--server, NEREUS_SERVER or
// the default) within the request timeout.
func (o *streamOpts) call(cmd *cobra.Command, e env, fn func(context.Context, *adminapi.Client) error) error {
	c, err := o.client(e)
	if err != nil {
		return err
	}
	ctx, cancel := o.reqCtx(cmd.Context(), 0)
	defer cancel()
	return fn(ctx, c)
}
