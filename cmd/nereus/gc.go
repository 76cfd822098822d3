package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nereusstream/nereus-go/adminapi"
)

// newGCCmd is `nereus gc`: what physical GC keeps and why, and running a
// pass now.
func newGCCmd(e env) *cobra.Command {
	o := &streamOpts{}
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Inspect and run garbage collection (space reclamation) on a running server",
		Long: `Inspect and run garbage collection on a running Nereus server.

GC deletes WAL segments, BookKeeper ledgers, generation objects and metadata
records once the committed heads prove nothing needs them (trimmed, deleted,
or served by a newer generation) and no reader protection holds them. It is
on by default; --gc-dry-run on the server makes it report instead of delete.

The server is --server, or NEREUS_SERVER, or ` + defaultServer + `.`,
	}
	o.addConnFlags(cmd, 2*time.Minute)
	cmd.AddCommand(newGCStatusCmd(e, o), newGCRunCmd(e, o))
	return cmd
}

func newGCStatusCmd(e env, o *streamOpts) *cobra.Command {
	return newGCReportCmd(e, o, "status", "Show the last GC pass: what is pending and why, and recent deletions", true,
		func(ctx context.Context, c *adminapi.Client) (adminapi.GCStatus, error) { return c.GCStatus(ctx) })
}

func newGCRunCmd(e env, o *streamOpts) *cobra.Command {
	return newGCReportCmd(e, o, "run", "Run one GC pass now and show its report", false,
		func(ctx context.Context, c *adminapi.Client) (adminapi.GCStatus, error) { return c.RunGC(ctx) })
}

// newGCReportCmd builds a subcommand that fetches a GC report with get and
// prints it as text or JSON; withLimit adds --limit (otherwise 20 rows).
func newGCReportCmd(e env, o *streamOpts, use, short string, withLimit bool,
	get func(context.Context, *adminapi.Client) (adminapi.GCStatus, error)) *cobra.Command {
	var format string
	limit := 20
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  argsWithHelp(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			return o.call(cmd, e, func(ctx context.Context, c *adminapi.Client) error {
				st, err := get(ctx, c)
				if err != nil {
					return err
				}
				if format == "json" {
					return printJSON(e.stdout, st)
				}
				printGCStatus(e.stdout, st, limit)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "text or json")
	if withLimit {
		cmd.Flags().IntVar(&limit, "limit", 20, "pending units and recent deletions to show")
	}
	return cmd
}

func printGCStatus(w io.Writer, st adminapi.GCStatus, limit int) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	mode := "on"
	switch {
	case st.Disabled:
		mode = "DISABLED (--gc-disabled): space is never reclaimed"
	case st.DryRun:
		mode = "dry run (--gc-dry-run): reports, deletes nothing"
	}
	fmt.Fprintf(tw, "gc:\t%s\n", mode)
	if st.LastPass.IsZero() {
		fmt.Fprintf(tw, "last pass:\tnone yet\n")
	} else {
		fmt.Fprintf(tw, "last pass:\t%s (%d ms)\n", st.LastPass.Format(time.RFC3339), st.DurationMs)
	}
	s := st.Stats
	fmt.Fprintf(tw, "deleted:\t%d segments, %d ledgers, %d generation objects, %d records, %d streams (%s)\n",
		s.DeletedSegments, s.DeletedLedgers, s.DeletedObjects, s.DeletedRecords, s.DeletedStreams, humanBytes(s.DeletedBytes))
	fmt.Fprintf(tw, "generations:\t%d published (%s), %d failed tasks; lag %s, oldest %ds; %d appends refused for lag\n",
		s.Materialized, humanBytes(s.MaterializedBytes), s.MaterializeFailures, humanBytes(s.MaterializeLagBytes), s.MaterializeLagSeconds,
		s.MaterializeBackpressured)
	fmt.Fprintf(tw, "merges:\t%d published, %d generations merged (%s), %d failed tasks\n",
		s.Merges, s.MergedSources, humanBytes(s.MergedBytes), s.MergeFailures)
	fmt.Fprintf(tw, "retention:\t%d trims\n", s.RetentionTrims)
	if len(st.Adopting) > 0 || s.Adoptions > 0 {
		now := "none"
		if len(st.Adopting) > 0 {
			now = strings.Join(st.Adopting, ", ")
		}
		fmt.Fprintf(tw, "adopted:\t%d dead writers so far; adopting now: %s\n", s.Adoptions, now)
	}
	fmt.Fprintf(tw, "pending:\t%d units (%s known)\n", st.PendingCount, humanBytes(st.PendingBytes))
	tw.Flush()
	for i, p := range st.Pending {
		if i == limit {
			fmt.Fprintf(w, "  ... %d more\n", st.PendingCount-limit)
			break
		}
		fmt.Fprintf(w, "  %-10s %s: %s\n", p.Kind, p.Unit, p.Reason)
	}
	if len(st.Recent) > 0 {
		fmt.Fprintln(w, "recent deletions:")
		from := max(0, len(st.Recent)-limit)
		for _, ev := range st.Recent[from:] {
			dry := ""
			if ev.DryRun {
				dry = " (dry run)"
			}
			fmt.Fprintf(w, "  %s %-10s %s %s: %s%s\n", ev.Time.Format(time.TimeOnly), ev.Kind, ev.Unit, humanBytes(ev.Bytes), ev.Reason, dry)
		}
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
