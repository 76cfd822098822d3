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

To run several nodes, share the stores: --object-store s3://BUCKET[/PREFIX]
(with --s3-endpoint, --s3-path-style for S3-compatible servers) and
--metadata etcd://HOST:PORT[,HOST:PORT...][/PREFIX]; each node keeps its own
--data-dir (it holds the node ID). Pass S3 credentials in the environment
(NEREUS_S3_ACCESS_KEY, NEREUS_S3_SECRET_KEY) or through the AWS credential
chain rather than as flags.

Listeners and TLS. Each protocol takes one address (--kafka-addr,
--pulsar-addr, --http-addr: one plaintext listener) or a list of listeners
with their own security and advertised addresses, as Kafka's listeners /
advertised.listeners and Pulsar's advertisedListeners do:

  --kafka-listeners PLAINTEXT://127.0.0.1:9092,SSL://0.0.0.0:9093
  --kafka-advertised-listeners SSL://broker1.example.com:9093
  --pulsar-listeners pulsar://127.0.0.1:6650,pulsar+ssl://0.0.0.0:6651
  --http-listeners http://127.0.0.1:8080,https://0.0.0.0:8443
  --tls-cert-file server.pem --tls-key-file server-key.pem
  [--tls-ca-file ca.pem --tls-client-auth requested|required]

Kafka SASL_PLAINTEXT and SASL_SSL listeners take SCRAM-SHA-256/512, PLAIN
and OAUTHBEARER (--kafka-sasl-mechanisms; users from "nereus kafka user set"
or kafka-configs; JWTs verified with --token-secret-key-file or
--token-public-key-file; KIP-368 re-authentication with --kafka-max-reauth).

Pulsar: --pulsar-authentication-providers token,tls, --pulsar-authorization
and --pulsar-superuser-roles (tenant admin roles and namespace/topic
permissions from the Pulsar admin paths). Admin API: --admin-auth token,tls
with --admin-roles and --admin-read-only-roles (/healthz and /metrics stay
open unless --admin-open-paths says otherwise).

TLS is 1.2 or newer; the certificate, key and CA files are re-read on SIGHUP
and when they change (--tls-reload-interval). scripts/gen-dev-certs.sh makes
a throwaway CA and certificates for a loopback try-out. Listeners bind
loopback by default; binding another address without TLS or without
authentication logs a SECURITY WARNING at start-up.

Every setting comes from, in order of precedence: a flag, an environment
variable (NEREUS_ + the flag name upper-cased, '-' as '_', e.g.
NEREUS_DATA_DIR), the YAML file named by --config (keys are the flag names),
or the built-in default.

SIGHUP reloads the TLS files. SIGINT or SIGTERM drains gracefully (stop
accepting, finish in-flight work, close storage) within --shutdown-timeout;
a second signal exits at once.`,
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
			defer startCPUProfile(e.lookupEnv, e.stderr)()
			return server.Run(ctx, cfg, logger)
		},
	}
	server.RegisterFlags(cmd.Flags())
	return cmd
}
