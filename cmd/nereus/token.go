package main

import (
	"crypto/rand"
	"fmt"
	"os"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/spf13/cobra"
)

// newTokenCmd makes HS256 keys and tokens for --token-secret-key-file (as
// Pulsar's `pulsar tokens create-secret-key` / `create` do). RS256 keys and
// tokens from another issuer work with --token-public-key-file.
func newTokenCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create JWT secret keys and tokens (Pulsar tokens, admin API bearer tokens, Kafka OAUTHBEARER)",
	}
	var out string
	key := &cobra.Command{
		Use:   "create-secret-key --output FILE",
		Short: "Write a random 32-byte HS256 secret key (the server's --token-secret-key-file)",
		Args:  argsWithHelp(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--output is required (the key is never printed)")
			}
			b := make([]byte, 32)
			if _, err := rand.Read(b); err != nil {
				return err
			}
			f, err := os.OpenFile(out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			if _, err := f.Write(b); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote a 32-byte secret key to %s\n", out)
			return nil
		},
	}
	key.Flags().StringVar(&out, "output", "", "file to create (mode 0600; must not exist)")
	var keyFile, subject, claim string
	var expiry time.Duration
	create := &cobra.Command{
		Use:   "create --secret-key-file FILE --subject ROLE [--expiry 24h]",
		Short: "Print an HS256 token for ROLE signed with the secret key",
		Args:  argsWithHelp(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if keyFile == "" || subject == "" {
				return fmt.Errorf("--secret-key-file and --subject are required")
			}
			secret, err := os.ReadFile(keyFile)
			if err != nil {
				return err
			}
			claims := jwt.MapClaims{claim: subject}
			if expiry > 0 {
				claims["exp"] = time.Now().Add(expiry).Unix()
			}
			tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			return nil
		},
	}
	create.Flags().StringVar(&keyFile, "secret-key-file", "", "HS256 secret key file")
	create.Flags().StringVar(&subject, "subject", "", "role / user the token names")
	create.Flags().StringVar(&claim, "role-claim", "sub", "claim carrying the role (the server's --token-role-claim)")
	create.Flags().DurationVar(&expiry, "expiry", 0, "lifetime (0: never expires)")
	cmd.AddCommand(key, create)
	return cmd
}
