package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/nereusstream/nereus-go/adminapi"
)

func newKafkaCmd(e env) *cobra.Command {
	o := &streamOpts{}
	cmd := &cobra.Command{
		Use:   "kafka",
		Short: "Manage the Kafka front end's security state on a running server",
		Long: `Manage the Kafka front end's security state on a running Nereus server
through its admin API (--server, or NEREUS_SERVER, or ` + defaultServer + `).

SCRAM users created here authenticate with SASL SCRAM-SHA-256/512 and PLAIN on
SASL_PLAINTEXT and SASL_SSL listeners. Kafka's own tools manage the same
credentials over the Kafka protocol once a user can authenticate:

  kafka-configs.sh --bootstrap-server HOST:PORT --command-config admin.properties \
    --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]' \
    --entity-type users --entity-name alice`,
	}
	o.addConnFlags(cmd, 30*time.Second)
	user := &cobra.Command{Use: "user", Aliases: []string{"users"}, Short: "SCRAM users: set, delete, list"}
	user.AddCommand(newKafkaUserSetCmd(e, o), newKafkaUserDeleteCmd(e, o), newKafkaUserListCmd(e, o))
	cmd.AddCommand(user)
	return cmd
}

func newKafkaUserSetCmd(e env, o *streamOpts) *cobra.Command {
	var mechs []string
	var iterations int
	var passwordFile string
	cmd := &cobra.Command{
		Use:   "set USER",
		Short: "Create or replace a user's SCRAM credentials (password from --password-file or stdin)",
		Long: `Create or replace a user's SCRAM credentials. The password is read from
--password-file, or from standard input (prompted for without echo on a
terminal); it is never a flag value. The server salts it with a fresh random
salt and stores only the derived keys.`,
		Args: argsWithHelp(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			pass, err := readPassword(e, passwordFile)
			if err != nil {
				return err
			}
			c, err := o.client(e)
			if err != nil {
				return err
			}
			for _, m := range mechs {
				ctx, cancel := o.reqCtx(cmd.Context(), 0)
				err := c.SetKafkaScram(ctx, args[0], adminapi.SetKafkaScramRequest{Mechanism: strings.ToUpper(m), Password: pass, Iterations: iterations})
				cancel()
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "set %s credential of %s\n", strings.ToUpper(m), args[0])
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&mechs, "mechanism", []string{"SCRAM-SHA-256", "SCRAM-SHA-512"}, "SCRAM mechanisms to set")
	cmd.Flags().IntVar(&iterations, "iterations", 8192, "PBKDF2 iterations (4096-16384)")
	cmd.Flags().StringVar(&passwordFile, "password-file", "", "read the password from this file (first line)")
	return cmd
}

func newKafkaUserDeleteCmd(e env, o *streamOpts) *cobra.Command {
	var mech string
	cmd := &cobra.Command{
		Use:   "delete USER",
		Short: "Delete a user's SCRAM credentials (all mechanisms, or --mechanism)",
		Args:  argsWithHelp(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.call(cmd, e, func(ctx context.Context, c *adminapi.Client) error {
				if err := c.DeleteKafkaScram(ctx, args[0], strings.ToUpper(mech)); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "deleted SCRAM credentials of %s\n", args[0])
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&mech, "mechanism", "", "only this mechanism")
	return cmd
}

func newKafkaUserListCmd(e env, o *streamOpts) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List users with SCRAM credentials (mechanisms and iterations; never secrets)",
		Args:  argsWithHelp(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			return o.call(cmd, e, func(ctx context.Context, c *adminapi.Client) error {
				users, err := c.ListKafkaScramUsers(ctx)
				if err != nil {
					return err
				}
				if format == "json" {
					return printJSON(cmd.OutOrStdout(), users)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "USER\tMECHANISM\tITERATIONS")
				for _, u := range users {
					for _, cr := range u.Credentials {
						fmt.Fprintf(tw, "%s\t%s\t%d\n", u.User, cr.Mechanism, cr.Iterations)
					}
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "text or json")
	return cmd
}

// readPassword reads a secret from file (first line), or from stdin
// (without echo when stdin is a terminal).
func readPassword(e env, file string) (string, error) {
	var line string
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		line, _, _ = strings.Cut(string(b), "\n")
	case isTerminalReader(e.stdin):
		fmt.Fprint(e.stderr, "password: ")
		b, err := term.ReadPassword(int(e.stdin.(*os.File).Fd()))
		fmt.Fprintln(e.stderr)
		if err != nil {
			return "", err
		}
		line = string(b)
	default:
		l, err := bufio.NewReader(io.LimitReader(e.stdin, 64<<10)).ReadString('\n')
		if err != nil && err != io.EOF {
			return "", err
		}
		line = l
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty password")
	}
	return line, nil
}

func isTerminalReader(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
