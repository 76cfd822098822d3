package server

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nereusstream/nereus-go/internal/authtoken"
	"github.com/nereusstream/nereus-go/kafka/ksasl"
	"github.com/nereusstream/nereus-go/listener"
)

// Security is authentication and authorization for every protocol. Its
// fields are flags, NEREUS_* variables and config-file keys
// (securitySettings). Secrets are only ever read from files named here
// (or, for credentials of the backends, environment variables); none is
// a flag value and none is logged.
type Security struct {
	// TokenSecretKeyFile (HS256) or TokenPublicKeyFile (RS256) verifies
	// the JWTs every protocol accepts: Pulsar token authentication, the
	// admin API's bearer tokens and Kafka SASL/OAUTHBEARER. The role (or
	// Kafka user) is the TokenRoleClaim claim (default "sub"); when
	// TokenAudience is set the token's "aud" must name it.
	TokenSecretKeyFile string
	TokenPublicKeyFile string
	TokenRoleClaim     string
	TokenAudience      string

	// KafkaSASLMechanisms are the mechanisms SASL listeners accept
	// (sasl.enabled.mechanisms; default SCRAM-SHA-256,SCRAM-SHA-512,PLAIN,
	// plus OAUTHBEARER when a token key is configured).
	KafkaSASLMechanisms string
	// KafkaAuthorizer enables Kafka ACLs (authorizer.class.name): every
	// request is checked against the ACLs in metadata; KafkaSuperUsers
	// ("User:admin;User:ops", Kafka's super.users syntax) may do anything;
	// KafkaAllowEveryoneIfNoACL is allow.everyone.if.no.acl.found.
	KafkaAuthorizer           bool
	KafkaSuperUsers           string
	KafkaAllowEveryoneIfNoACL bool
	// PulsarAuthenticationProviders enables Pulsar authentication:
	// "token" (JWTs verified with the token key; the role is the role
	// claim) and/or "tls" (the role is the verified client certificate's
	// common name). Empty disables it. PulsarAnonymousRole is the role of
	// clients without credentials (anonymousUserRole; empty refuses them).
	PulsarAuthenticationProviders string
	PulsarAnonymousRole           string
	// PulsarAuthorization checks produce / consume / lookup and the admin
	// REST paths against PulsarSuperUserRoles, tenant admin roles and the
	// namespace and topic permissions granted through the admin API.
	PulsarAuthorization    bool
	PulsarSuperUserRoles   string
	PulsarAuthRefreshCheck time.Duration
	// AdminAuth turns on authentication of the admin HTTP API: "token"
	// (bearer JWTs) and/or "tls" (client certificates; needs an https://
	// listener and tls-client-auth). AdminRoles may do anything,
	// AdminReadOnlyRoles only GET/HEAD. AdminOpenPaths stay open
	// (default /healthz,/metrics; empty: nothing is open).
	AdminAuth          string
	AdminRoles         string
	AdminReadOnlyRoles string
	AdminOpenPaths     string
	// Etcd client security (--metadata etcd://...): EtcdCAFile verifies
	// the servers (https endpoints), EtcdCertFile/EtcdKeyFile are a client
	// certificate, EtcdUsername with the password from EtcdPasswordFile or
	// the NEREUS_ETCD_PASSWORD environment variable (never a flag) is etcd
	// authentication.
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
	EtcdUsername                          string
	EtcdPasswordFile                      string
	EtcdPassword                          Secret
	// BookKeeperZKDigestFile holds "user:password" for ZooKeeper digest
	// authentication of the BookKeeper metadata session (or the
	// NEREUS_BOOKKEEPER_ZK_DIGEST environment variable).
	BookKeeperZKDigestFile string
	BookKeeperZKDigest     Secret
	// KafkaMaxReauth is connections.max.reauth.ms: SASL sessions last this
	// long (bounded by an OAUTHBEARER token's expiry) and must
	// re-authenticate (KIP-368); 0 (default) disables re-authentication.
	KafkaMaxReauth time.Duration
}

func defaultSecurity() Security {
	return Security{TokenRoleClaim: "sub", PulsarAuthRefreshCheck: time.Minute, AdminOpenPaths: "/healthz,/metrics"}
}

func splitRoles(v string) []string {
	var out []string
	for _, r := range strings.Split(v, ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	return out
}

func (s Security) pulsarProviders() []string {
	var out []string
	for _, p := range splitRoles(s.PulsarAuthenticationProviders) {
		out = append(out, strings.ToLower(p))
	}
	return out
}

// TokenConfig is the JWT validation setting.
func (s Security) TokenConfig() authtoken.Config {
	return authtoken.Config{SecretKeyFile: s.TokenSecretKeyFile, PublicKeyFile: s.TokenPublicKeyFile,
		RoleClaim: s.TokenRoleClaim, Audience: s.TokenAudience}
}

func (s Security) kafkaMechanisms() []string {
	var out []string
	for _, m := range strings.Split(s.KafkaSASLMechanisms, ",") {
		if m = strings.ToUpper(strings.TrimSpace(m)); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// kafkaSuperUsers splits super.users (';'-separated, as Kafka; ','
// accepted too).
func (s Security) kafkaSuperUsers() []string {
	var out []string
	for _, u := range strings.FieldsFunc(s.KafkaSuperUsers, func(r rune) bool { return r == ';' || r == ',' }) {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}

func (s Security) validate() []error {
	var errs []error
	if s.TokenSecretKeyFile != "" && s.TokenPublicKeyFile != "" {
		errs = append(errs, errors.New("token-secret-key-file and token-public-key-file: set one (HS256 or RS256)"))
	}
	for _, m := range s.kafkaMechanisms() {
		switch m {
		case ksasl.Plain, ksasl.ScramSHA256, ksasl.ScramSHA512:
		case ksasl.OAuthBearer:
			if !s.TokenConfig().Configured() {
				errs = append(errs, errors.New("kafka-sasl-mechanisms OAUTHBEARER needs token-secret-key-file or token-public-key-file"))
			}
		default:
			errs = append(errs, fmt.Errorf("kafka-sasl-mechanisms: %q is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER", m))
		}
	}
	for _, u := range s.kafkaSuperUsers() {
		if typ, name, ok := strings.Cut(u, ":"); !ok || typ == "" || name == "" {
			errs = append(errs, fmt.Errorf("kafka-super-users: %q is not a principal (want User:NAME)", u))
		}
	}
	if (s.KafkaSuperUsers != "" || s.KafkaAllowEveryoneIfNoACL) && !s.KafkaAuthorizer {
		errs = append(errs, errors.New("kafka-super-users and kafka-allow-everyone-if-no-acl-found need kafka-authorizer"))
	}
	for _, p := range s.pulsarProviders() {
		switch p {
		case "token":
			if !s.TokenConfig().Configured() {
				errs = append(errs, errors.New("pulsar-authentication-providers token needs token-secret-key-file or token-public-key-file"))
			}
		case "tls":
		default:
			errs = append(errs, fmt.Errorf("pulsar-authentication-providers: %q is not token or tls", p))
		}
	}
	if s.PulsarAuthorization && len(s.pulsarProviders()) == 0 {
		errs = append(errs, errors.New("pulsar-authorization needs pulsar-authentication-providers (roles come from authentication)"))
	}
	if (s.PulsarAnonymousRole != "" || s.PulsarSuperUserRoles != "") && len(s.pulsarProviders()) == 0 {
		errs = append(errs, errors.New("pulsar-anonymous-role and pulsar-superuser-roles need pulsar-authentication-providers"))
	}
	for _, p := range splitRoles(s.AdminAuth) {
		switch strings.ToLower(p) {
		case "token":
			if !s.TokenConfig().Configured() {
				errs = append(errs, errors.New("admin-auth token needs token-secret-key-file or token-public-key-file"))
			}
		case "tls":
		default:
			errs = append(errs, fmt.Errorf("admin-auth: %q is not token or tls", p))
		}
	}
	if s.AdminAuth != "" && s.AdminRoles == "" && s.AdminReadOnlyRoles == "" {
		errs = append(errs, errors.New("admin-auth needs admin-roles (and/or admin-read-only-roles): no role could do anything"))
	}
	for _, p := range splitRoles(s.AdminOpenPaths) {
		if !strings.HasPrefix(p, "/") {
			errs = append(errs, fmt.Errorf("admin-open-paths: %q is not a path", p))
		}
	}
	if s.EtcdPasswordFile != "" && s.EtcdPassword != "" {
		errs = append(errs, errors.New("etcd-password-file and NEREUS_ETCD_PASSWORD are both set: use one"))
	}
	if (s.EtcdPasswordFile != "" || s.EtcdPassword != "") && s.EtcdUsername == "" {
		errs = append(errs, errors.New("an etcd password needs etcd-username"))
	}
	if (s.EtcdCertFile == "") != (s.EtcdKeyFile == "") {
		errs = append(errs, errors.New("etcd-cert-file and etcd-key-file go together"))
	}
	if s.BookKeeperZKDigestFile != "" && s.BookKeeperZKDigest != "" {
		errs = append(errs, errors.New("bookkeeper-zk-digest-file and NEREUS_BOOKKEEPER_ZK_DIGEST are both set: use one"))
	}
	if s.PulsarAuthRefreshCheck <= 0 {
		errs = append(errs, fmt.Errorf("pulsar-auth-refresh-check %v must be positive", s.PulsarAuthRefreshCheck))
	}
	if s.KafkaMaxReauth < 0 {
		errs = append(errs, fmt.Errorf("kafka-max-reauth %v must not be negative", s.KafkaMaxReauth))
	}
	return errs
}

var securitySettings = []setting{
	mk("token-secret-key-file", "file with the HS256 secret that signs JWTs (Pulsar tokens, admin API bearer tokens, Kafka OAUTHBEARER)", func(c *Config) *string { return &c.TokenSecretKeyFile }),
	mk("token-public-key-file", "file with the RS256 public key (PEM or DER) that verifies JWTs", func(c *Config) *string { return &c.TokenPublicKeyFile }),
	mk("token-role-claim", "JWT claim naming the role / user", func(c *Config) *string { return &c.TokenRoleClaim }),
	mk("token-audience", "when set, JWTs must name it in their aud claim", func(c *Config) *string { return &c.TokenAudience }),
	mk("kafka-sasl-mechanisms", "mechanisms of SASL_PLAINTEXT/SASL_SSL listeners (default SCRAM-SHA-256,SCRAM-SHA-512,PLAIN[,OAUTHBEARER with a token key])", func(c *Config) *string { return &c.KafkaSASLMechanisms }),
	boolSetting("kafka-authorizer", "enable Kafka ACLs: every request is checked against the ACLs in metadata (CreateAcls/DescribeAcls/DeleteAcls)", func(c *Config) *bool { return &c.KafkaAuthorizer }),
	mk("kafka-super-users", "Kafka super.users: principals allowed everything, e.g. User:admin;User:ops", func(c *Config) *string { return &c.KafkaSuperUsers }),
	boolSetting("kafka-allow-everyone-if-no-acl-found", "Kafka allow.everyone.if.no.acl.found: allow operations on resources no ACL mentions", func(c *Config) *bool { return &c.KafkaAllowEveryoneIfNoACL }),
	mk("pulsar-authentication-providers", "Pulsar authentication: token and/or tls (empty: off)", func(c *Config) *string { return &c.PulsarAuthenticationProviders }),
	mk("pulsar-anonymous-role", "Pulsar role of clients without credentials (empty: refuse them)", func(c *Config) *string { return &c.PulsarAnonymousRole }),
	boolSetting("pulsar-authorization", "Pulsar authorization: superusers, tenant admins, namespace/topic permissions", func(c *Config) *bool { return &c.PulsarAuthorization }),
	mk("pulsar-superuser-roles", "Pulsar roles allowed everything, comma-separated", func(c *Config) *string { return &c.PulsarSuperUserRoles }),
	durationSetting("pulsar-auth-refresh-check", "how often Pulsar sessions are checked for expired tokens (AUTH_CHALLENGE)", func(c *Config) *time.Duration { return &c.PulsarAuthRefreshCheck }),
	mk("etcd-ca-file", "PEM CA verifying the etcd servers (TLS to etcd)", func(c *Config) *string { return &c.EtcdCAFile }),
	mk("etcd-cert-file", "PEM client certificate for etcd", func(c *Config) *string { return &c.EtcdCertFile }),
	mk("etcd-key-file", "PEM key of etcd-cert-file", func(c *Config) *string { return &c.EtcdKeyFile }),
	mk("etcd-username", "etcd user (password from etcd-password-file or NEREUS_ETCD_PASSWORD)", func(c *Config) *string { return &c.EtcdUsername }),
	mk("etcd-password-file", "file with the etcd password", func(c *Config) *string { return &c.EtcdPasswordFile }),
	mk("bookkeeper-zk-digest-file", "file with user:password for ZooKeeper digest auth of the BookKeeper metadata (or NEREUS_BOOKKEEPER_ZK_DIGEST)", func(c *Config) *string { return &c.BookKeeperZKDigestFile }),
	mk("admin-auth", "admin HTTP API authentication: token and/or tls (empty: open)", func(c *Config) *string { return &c.AdminAuth }),
	mk("admin-roles", "roles (token role claim or certificate CN) allowed every admin API call, comma-separated", func(c *Config) *string { return &c.AdminRoles }),
	mk("admin-read-only-roles", "roles allowed only GET/HEAD on the admin API, comma-separated", func(c *Config) *string { return &c.AdminReadOnlyRoles }),
	mk("admin-open-paths", "admin paths served without authentication", func(c *Config) *string { return &c.AdminOpenPaths }),
	durationSetting("kafka-max-reauth", "Kafka connections.max.reauth.ms: SASL session lifetime before re-authentication (0: never)", func(c *Config) *time.Duration { return &c.KafkaMaxReauth }),
}

func init() { settings = append(settings, securitySettings...) }

// listenerAuthenticated reports whether a listener admits only clients
// that proved who they are (for the exposure warning).
func (c Config) listenerAuthenticated(s listener.Spec) bool {
	if s.Security.TLS && listener.ClientAuth(c.TLSClientAuth) == listener.ClientAuthRequired {
		return true
	}
	switch s.Protocol {
	case listener.Pulsar:
		return len(c.pulsarProviders()) > 0 && c.PulsarAnonymousRole == ""
	case listener.HTTP:
		return c.adminAuthenticated()
	}
	return s.Security.SASL
}

// adminAuthenticated: the admin HTTP API requires credentials.
func (c Config) adminAuthenticated() bool { return len(c.adminAuthProviders()) > 0 }

// secretEnv are the credentials taken only from the environment (never
// flags or config files: those show in ps and in checked-in files).
var secretEnv = []struct {
	name string
	set  func(*Config, string)
}{
	{"NEREUS_ETCD_PASSWORD", func(c *Config, v string) { c.EtcdPassword = Secret(v) }},
	{"NEREUS_BOOKKEEPER_ZK_DIGEST", func(c *Config, v string) { c.BookKeeperZKDigest = Secret(v) }},
}

// readSecret is a secret from file (first line, trailing newline removed)
// or the environment value.
func readSecret(file string, env Secret, what string) (string, error) {
	if file == "" {
		return string(env), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimRight(line, "\r"), nil
}
