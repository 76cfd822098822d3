package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nereusstream/nereus-go/server"
)

// run executes the command line and returns the process exit status.
func run(ctx context.Context, e env, args []string) int {
	root := newRootCmd(e)
	root.SetArgs(args)
	root.SetIn(e.stdin)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ex *exitError
	if errors.As(err, &ex) {
		if ex.msg != "" {
			fmt.Fprintln(e.stderr, "nereus:", oneLine(ex.msg))
		}
		return ex.code
	}
	fmt.Fprintln(e.stderr, "nereus:", oneLine(err.Error()))
	return 1
}

// exitError carries an explicit exit status.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// oneLine keeps error output to a single line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

func newRootCmd(e env) *cobra.Command {
	root := &cobra.Command{
		Use:   "nereus",
		Short: "Nereus: shared stream storage for Kafka and Pulsar",
		Long: `Nereus is shared stream storage beneath Kafka and Pulsar clients.

Run a server on embedded defaults with "nereus serve"; manage and use streams
on a running server with "nereus stream ...".`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%v (see '%s --help')", err, c.CommandPath())
	})
	root.AddCommand(newServeCmd(e), newStreamCmd(e), newClusterCmd(e), newKafkaCmd(e), newTokenCmd(), newGCCmd(e), newBenchCmd(e), newVersionCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), "nereus", server.Version)
			return nil
		},
	}
}

// argsWithHelp wraps a cobra positional-args validator so its error names
// the command and points at --help, on one line.
func argsWithHelp(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return fmt.Errorf("%v (usage: %s)", err, cmd.UseLine())
		}
		return nil
	}
}
