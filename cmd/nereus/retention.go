package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nereusstream/nereus-go/adminapi"
)

// newRetentionCmd is `nereus stream retention NAME`: show or change how
// long and how much of a stream is kept. The core enforces it every
// --retention-interval by trimming whole runs older or beyond the limit.
func newRetentionCmd(e env, o *streamOpts) *cobra.Command {
	var keepFor time.Duration
	var bytesFlag string
	var clear bool
	var format string
	cmd := &cobra.Command{
		Use:   "retention NAME [--time DURATION] [--bytes SIZE] [--clear]",
		Short: "Show or set a stream's retention (time and/or size; the server trims beyond it)",
		Long: `Show or set a stream's retention.

Without flags it prints the current retention. --time keeps entries younger
than DURATION (e.g. 168h); --bytes keeps at most SIZE bytes (e.g. 10GiB); a
zero value, or --clear for both, means unlimited. Setting one limit keeps the
other. The server enforces retention every --retention-interval (default 1s)
by advancing the stream's start offset; it never removes entries a reader
still needs within the limits.`,
		Args: argsWithHelp(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			return o.call(cmd, e, func(ctx context.Context, c *adminapi.Client) error {
				info, err := c.DescribeStream(ctx, args[0])
				if err != nil {
					return err
				}
				setTime, setBytes := cmd.Flags().Changed("time"), cmd.Flags().Changed("bytes")
				if clear && (setTime || setBytes) {
					return errors.New("--clear cannot be combined with --time or --bytes")
				}
				if clear || setTime || setBytes {
					r := info.Retention
					if clear {
						r = adminapi.Retention{}
					}
					if setTime {
						if keepFor < 0 {
							return fmt.Errorf("--time %v: must not be negative", keepFor)
						}
						r.TimeMs = keepFor.Milliseconds()
					}
					if setBytes {
						n, err := parseSize(bytesFlag)
						if err != nil {
							return fmt.Errorf("--bytes %q: %w", bytesFlag, err)
						}
						r.Bytes = n
					}
					if info, err = c.SetRetention(ctx, args[0], r); err != nil {
						return err
					}
				}
				if format == "json" {
					return printJSON(e.stdout, info.Retention)
				}
				fmt.Fprintf(e.stdout, "%s retention: %s\n", info.Name, describeRetention(info.Retention))
				return nil
			})
		},
	}
	cmd.Flags().DurationVar(&keepFor, "time", 0, "keep entries younger than this (0: no time limit)")
	cmd.Flags().StringVar(&bytesFlag, "bytes", "", "keep at most this many bytes, e.g. 1073741824 or 1GiB (0: no size limit)")
	cmd.Flags().BoolVar(&clear, "clear", false, "remove both limits (keep everything)")
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

func describeRetention(r adminapi.Retention) string {
	t, b := "unlimited", "unlimited"
	if r.TimeMs > 0 {
		t = (time.Duration(r.TimeMs) * time.Millisecond).String()
	}
	if r.Bytes > 0 {
		b = formatSize(r.Bytes)
	}
	return "time " + t + ", bytes " + b
}

// parseSize accepts a plain byte count or one with a binary suffix (KiB,
// MiB, GiB, TiB; K, M, G, T mean the same), as `nereus serve` does.
func parseSize(v string) (int64, error) {
	s := strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("want a non-negative byte count such as 1073741824 or 1GiB")
	}
	return n * mult, nil
}

func formatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + " B"
}
