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

func newClusterCmd(e env) *cobra.Command {
	o := &streamOpts{}
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Inspect the cluster of Nereus nodes a server belongs to",
		Long: `Inspect the cluster of Nereus nodes that share the server's metadata store.

The server is --server, or NEREUS_SERVER, or ` + defaultServer + `.`,
	}
	o.addConnFlags(cmd, 30*time.Second)
	cmd.AddCommand(newClusterStatusCmd(e, o))
	return cmd
}

func newClusterStatusCmd(e env, o *streamOpts) *cobra.Command {
	var format string
	var limit int
	cmd := &cobra.Command{
		Use:   "status",
		Short: "List the brokers, their addresses, session ages and owned streams",
		Long: `List the registered brokers as the server sees them: Kafka broker id, node id,
state (active, or draining while it leaves), rack, the age of its registry
session, how many streams the ownership policy assigns to it and how many
append sessions it holds now, and its advertised addresses.`,
		Args: argsWithHelp(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			return o.call(cmd, e, func(ctx context.Context, c *adminapi.Client) error {
				st, err := c.ClusterStatus(ctx, limit)
				if err != nil {
					return err
				}
				if format == "json" {
					return printJSON(cmd.OutOrStdout(), st)
				}
				printClusterStatus(cmd.OutOrStdout(), st)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	cmd.Flags().IntVar(&limit, "limit", 0, "scan at most this many streams for the per-broker counts (0: the server's default, 100000)")
	return cmd
}

func printClusterStatus(w io.Writer, st adminapi.ClusterStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNODE\tSTATE\tRACK\tSESSION AGE\tASSIGNED\tHELD\tENDPOINTS")
	for _, b := range st.Brokers {
		id := fmt.Sprint(b.KafkaBrokerID)
		if b.Self {
			id += "*"
		}
		rack := b.Rack
		if rack == "" {
			rack = "-"
		}
		var eps []string
		for _, e := range b.Endpoints {
			eps = append(eps, e.Protocol+"="+e.Address)
		}
		age := (time.Duration(b.SessionAgeSeconds * float64(time.Second))).Round(time.Second)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", id, b.NodeID, b.State, rack, age, b.AssignedStreams,
			b.HeldStreams, strings.Join(eps, " "))
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d brokers, %d streams (%d without a live owner session)", len(st.Brokers), st.Streams, st.Unowned)
	if st.Truncated {
		fmt.Fprint(w, ", more not scanned (--limit)")
	}
	fmt.Fprintln(w, "; * = the node that answered")
	if st.Isolated {
		fmt.Fprintln(w, "warning: the answering node is isolated from the metadata store and owns nothing")
	}
	if st.Leaving {
		fmt.Fprintln(w, "note: the answering node is leaving the cluster")
	}
}
