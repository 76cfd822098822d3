package pulsar

// Authentication and authorization, as Pulsar brokers do them:
//
//   - CONNECT carries auth_method_name and auth_data: "token" (a JWT,
//     internal/authtoken; the role is its subject claim) or "tls" (the
//     role is the verified client certificate's common name). No
//     credentials get the anonymous role when one is configured. A failure
//     answers ERROR AuthenticationError "Unable to authenticate" and
//     closes the connection.
//   - A token's expiry is checked every RefreshCheck: an expired session of
//     a client that supports auth refresh gets AUTH_CHALLENGE and must
//     answer AUTH_RESPONSE with a valid token of the same role before the
//     next check; otherwise (or without refresh support) the connection is
//     closed.
//   - With authorization on, PRODUCER needs "produce", SUBSCRIBE "consume",
//     LOOKUP / PARTITIONED_METADATA / GET_TOPICS_OF_NAMESPACE either, on
//     the topic or its namespace (auth_policies in the namespace policies,
//     granted through the admin REST permissions paths); tenant admin
//     roles and superuser roles may do anything in their scope. A denial
//     answers AuthorizationError.

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nereusstream/nereus-go/internal/authtoken"
	"github.com/nereusstream/nereus-go/listener"
	"github.com/nereusstream/nereus-go/managedledger"
	"github.com/nereusstream/nereus-go/pulsar/pb"
	"github.com/nereusstream/nereus-go/pulsar/wire"
)

// AuthConfig is the broker's authentication and authorization. The zero
// value authenticates nobody and allows everything.
type AuthConfig struct {
	// Providers are the enabled authentication methods, "token" and/or
	// "tls" (Pulsar's authenticationProviders); empty disables
	// authentication.
	Providers []string
	// Tokens validates "token" credentials (required with the token
	// provider).
	Tokens *authtoken.Validator
	// AnonymousRole is the role of clients that send no credentials
	// (Pulsar's anonymousUserRole); empty refuses them.
	AnonymousRole string
	// Authorization checks topic and admin operations against superuser
	// roles, tenant admin roles and namespace / topic permissions.
	Authorization bool
	// SuperUserRoles may do anything (superUserRoles).
	SuperUserRoles []string
	// RefreshCheck is how often sessions are checked for expired
	// credentials (authenticationRefreshCheckSeconds; default 60s).
	RefreshCheck time.Duration
}

func (a AuthConfig) enabled() bool { return len(a.Providers) > 0 }

func (a AuthConfig) provider(name string) bool { return slices.Contains(a.Providers, name) }

// Pulsar's authentication method names.
const (
	authToken = "token"
	authTLS   = "tls"
)

// errUnableToAuthenticate is Pulsar's answer to any failed authentication.
const errUnableToAuthenticate = "Unable to authenticate"

// identity is who a connection or HTTP request authenticated as.
type identity struct {
	role    string
	method  string
	expires time.Time // zero: the credential does not expire
}

// authenticate checks one set of credentials. token is the bearer token
// (binary auth_data, or an HTTP Authorization header); nc the connection
// (for a TLS client certificate); r unused without one.
func (s *Server) authenticate(method string, data []byte, nc net.Conn) (identity, error) {
	a := s.cfg.Auth
	if !a.enabled() {
		return identity{}, nil
	}
	switch method {
	case authToken:
		if !a.provider(authToken) || a.Tokens == nil {
			return identity{}, fmt.Errorf("token authentication is not enabled")
		}
		tok := string(data)
		if len(tok) > 6 && (tok[:6] == "token:") {
			tok = tok[6:]
		}
		c, err := a.Tokens.Validate(tok, time.Now())
		if err != nil {
			return identity{}, err
		}
		return identity{role: c.Role, method: authToken, expires: c.ExpiresAt}, nil
	case authTLS:
		if !a.provider(authTLS) {
			return identity{}, fmt.Errorf("tls authentication is not enabled")
		}
		cert := listener.PeerCertificate(nc)
		if cert == nil || cert.Subject.CommonName == "" {
			return identity{}, fmt.Errorf("no verified client certificate with a common name")
		}
		return identity{role: cert.Subject.CommonName, method: authTLS}, nil
	case "", "none":
		if a.AnonymousRole != "" {
			return identity{role: a.AnonymousRole, method: "anonymous"}, nil
		}
		return identity{}, fmt.Errorf("no credentials and no anonymous role")
	}
	return identity{}, fmt.Errorf("unsupported authentication method %q", method)
}

// authCheckLoop challenges or disconnects sessions whose credentials
// expired (Pulsar's authentication refresh).
func (c *conn) authCheckLoop() {
	iv := c.s.cfg.Auth.RefreshCheck
	if iv <= 0 {
		iv = time.Minute
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		select {
		case <-c.closed:
			return
		case <-t.C:
		}
		c.authMu.Lock()
		id, pending, refresh := c.id, c.challengePending, c.supportsRefresh
		expired := !id.expires.IsZero() && !time.Now().Before(id.expires)
		if expired && refresh && !pending {
			c.challengePending = true
		}
		c.authMu.Unlock()
		switch {
		case !expired:
		case !refresh || pending:
			c.log.Info("pulsar credentials expired; closing the connection", "role", id.role, "refresh_supported", refresh)
			c.close()
			return
		default:
			c.sendCommand(&pb.BaseCommand{Type: pb.BaseCommand_AUTH_CHALLENGE.Enum(), AuthChallenge: &pb.CommandAuthChallenge{
				ServerVersion: proto.String(ServerVersion), ProtocolVersion: proto.Int32(c.protocolVersion),
				Challenge: &pb.AuthData{AuthMethodName: proto.String(id.method), AuthData: []byte("refresh")}}})
		}
	}
}

// handleAuthResponse takes a refreshed credential: it must authenticate
// the same role; anything else closes the connection.
func handleAuthResponse(c *conn, f wire.Frame) error {
	ar := f.Cmd.GetAuthResponse()
	if !c.s.cfg.Auth.enabled() {
		return nil
	}
	id, err := c.s.authenticate(ar.GetResponse().GetAuthMethodName(), ar.GetResponse().GetAuthData(), c.nc)
	c.authMu.Lock()
	defer c.authMu.Unlock()
	if err != nil || id.role != c.id.role {
		c.log.Info("pulsar auth refresh refused; closing the connection", "role", c.id.role, "new_role", id.role, "err", err)
		c.sendError(0, pb.ServerError_AuthenticationError, errUnableToAuthenticate)
		return fmt.Errorf("auth refresh failed")
	}
	c.id, c.challengePending = id, false
	c.log.Debug("pulsar credentials refreshed", "role", id.role, "expires", id.expires)
	return nil
}

// Pulsar's AuthActions.
const (
	actionProduce = "produce"
	actionConsume = "consume"
	actionLookup  = "lookup" // produce or consume (or functions)
)

func (s *Server) superUser(role string) bool {
	return slices.Contains(s.cfg.Auth.SuperUserRoles, role)
}

// tenantAdmin reports whether role administers tenant (a superuser, or a
// role in the tenant's adminRoles).
func (s *Server) tenantAdmin(ctx context.Context, role, tenant string) (bool, error) {
	if s.superUser(role) {
		return true, nil
	}
	info, err := s.ml.GetTenant(ctx, tenant)
	if err != nil {
		return false, nil // an unknown tenant has no admins
	}
	return slices.Contains(info.AdminRoles, role), nil
}

// allowedTopic decides a topic operation for role.
func (s *Server) allowedTopic(ctx context.Context, role string, topic managedledger.TopicName, action string) (bool, error) {
	if !s.cfg.Auth.Authorization {
		return true, nil
	}
	if ok, err := s.tenantAdmin(ctx, role, topic.Tenant); ok || err != nil {
		return ok, err
	}
	pol, err := s.ml.GetNamespace(ctx, topic.NamespaceName())
	if err != nil || pol.AuthPolicies == nil {
		return false, nil
	}
	grants := func(actions []string) bool {
		for _, a := range actions {
			if a == action || (action == actionLookup && (a == actionProduce || a == actionConsume || a == "functions")) {
				return true
			}
		}
		return false
	}
	if grants(pol.AuthPolicies.NamespaceAuth[role]) {
		return true, nil
	}
	if grants(pol.AuthPolicies.DestinationAuth[topic.Base().String()][role]) {
		return true, nil
	}
	return false, nil
}

// allowedNamespace decides a namespace-wide operation (listing topics):
// any permission on the namespace, or tenant admin.
func (s *Server) allowedNamespace(ctx context.Context, role, namespace string) (bool, error) {
	if !s.cfg.Auth.Authorization {
		return true, nil
	}
	tenant, _, _ := cutNamespace(namespace)
	if ok, err := s.tenantAdmin(ctx, role, tenant); ok || err != nil {
		return ok, err
	}
	pol, err := s.ml.GetNamespace(ctx, namespace)
	if err != nil || pol.AuthPolicies == nil {
		return false, nil
	}
	return len(pol.AuthPolicies.NamespaceAuth[role]) > 0, nil
}

func cutNamespace(ns string) (tenant, local string, ok bool) {
	for i := 0; i < len(ns); i++ {
		if ns[i] == '/' {
			return ns[:i], ns[i+1:], true
		}
	}
	return ns, "", false
}

// authorize checks the connection's role for a topic operation; the error
// is an AuthorizationError with Pulsar's message.
func (c *conn) authorize(ctx context.Context, topic managedledger.TopicName, action string) error {
	if !c.s.cfg.Auth.Authorization {
		return nil
	}
	c.authMu.Lock()
	role := c.id.role
	c.authMu.Unlock()
	ok, err := c.s.allowedTopic(ctx, role, topic, action)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	var verb string
	switch action {
	case actionProduce:
		verb = "Publish"
	case actionConsume:
		verb = "subscribe"
	default:
		verb = "Lookup"
	}
	c.log.Info("pulsar operation not authorized", "role", role, "topic", topic.String(), "action", action)
	return newError(pb.ServerError_AuthorizationError, "Client is not authorized to "+verb)
}
