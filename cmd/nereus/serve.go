package main

import (
	"github.com/spf13/cobra"

	"github.com/nereusstream/nereus-go/server"
)

func newServeCmd(e env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the Nereus server",
		Long: `Run the Nereus server.

On its defaults it needs no external service: data lives in ./nereus-data and
the admin HTTP API (/healthz, /metrics, /v1/streams) listens on 127.0.0.1:8080.

Every setting comes from, in order of precedence: a flag, an environment
variable (NEREUS_ + the flag name upper-cased, '-' as '_', e.g.
NEREUS_DATA_DIR), the YAML file named by --config (keys are the flag names),
or the built-in default.

SIGINT or SIGTERM drains gracefully (stop accepting, finish in-flight work,
close storage) within --shutdown-timeout; a second signal exits at once.`,
		Args: argsWithHelp(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := server.LoadConfig(cmd.Flags(), e.lookupEnv)
			if err != nil {
				return err
			}
			logger, err := server.NewLogger(cfg, e.stderr)
			if err != nil {
				return err
			}
			ctx, stop := e.signalContext(cmd.Context())
			defer stop()
			go func() {
				// After the first signal, restore default handling so a
				// second one kills a drain that hangs.
				<-ctx.Done()
				stop()
			}()
			return server.Run(ctx, cfg, logger)
		},
	}
	server.RegisterFlags(cmd.Flags())
	return cmd
}
