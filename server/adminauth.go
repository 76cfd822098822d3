package server

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nereusstream/nereus-go/adminapi"
	"github.com/nereusstream/nereus-go/internal/authtoken"
)

// Admin HTTP API authentication and roles.
//
// With --admin-auth token and/or tls, every request on the admin port
// must carry a bearer JWT (Authorization: Bearer <token>, verified with
// the token key; role = the role claim) or a client certificate the CA
// verified (role = its common name). Roles in --admin-roles may do
// anything; roles in --admin-read-only-roles may only read (GET, HEAD).
// Paths in --admin-open-paths (default /healthz and /metrics) stay open.
// Pulsar's REST paths (/admin/v2/, /lookup/v2/) are Pulsar's own to
// authorize when Pulsar authentication is on; otherwise they fall under
// these rules too, so turning on admin authentication never leaves a
// path that can delete data open.

type adminAuth struct {
	tokens    *authtoken.Validator
	token     bool
	tls       bool
	admins    []string
	readers   []string
	open      []string
	skipPaths []string // prefixes another authenticator owns
}

func (c Config) adminAuthProviders() []string {
	var out []string
	for _, p := range splitRoles(c.AdminAuth) {
		out = append(out, strings.ToLower(p))
	}
	return out
}

func newAdminAuth(c Config, tokens *authtoken.Validator) *adminAuth {
	prov := c.adminAuthProviders()
	if len(prov) == 0 {
		return nil
	}
	a := &adminAuth{tokens: tokens, token: slices.Contains(prov, "token"), tls: slices.Contains(prov, "tls"),
		admins: splitRoles(c.AdminRoles), readers: splitRoles(c.AdminReadOnlyRoles), open: splitRoles(c.AdminOpenPaths)}
	if len(c.pulsarProviders()) > 0 {
		a.skipPaths = []string{"/admin/v2/", "/lookup/v2/"}
	}
	return a
}

// role authenticates a request; ok is false without valid credentials.
func (a *adminAuth) role(r *http.Request) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, found := strings.Cut(h, " ")
		if !found || !strings.EqualFold(scheme, "Bearer") || !a.token || a.tokens == nil {
			return "", false
		}
		c, err := a.tokens.Validate(strings.TrimSpace(tok), time.Now())
		if err != nil {
			return "", false
		}
		return c.Role, true
	}
	if a.tls && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		if cn := r.TLS.PeerCertificates[0].Subject.CommonName; cn != "" {
			return cn, true
		}
	}
	return "", false
}

func (a *adminAuth) wrap(next http.Handler, s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range a.open {
			if r.URL.Path == p {
				next.ServeHTTP(w, r)
				return
			}
		}
		for _, p := range a.skipPaths {
			if strings.HasPrefix(r.URL.Path, p) {
				next.ServeHTTP(w, r)
				return
			}
		}
		role, ok := a.role(r)
		if !ok {
			s.metrics.adminAuthDenied.WithLabelValues("unauthenticated").Inc()
			w.Header().Set("WWW-Authenticate", `Bearer realm="nereus"`)
			writeError(w, adminapi.CodeUnauthenticated, "authentication required: send Authorization: Bearer <token> or a client certificate", "")
			return
		}
		readOnly := r.Method == http.MethodGet || r.Method == http.MethodHead
		switch {
		case slices.Contains(a.admins, role):
		case readOnly && slices.Contains(a.readers, role):
		default:
			s.metrics.adminAuthDenied.WithLabelValues("forbidden").Inc()
			s.logger.Info("admin API request refused", "role", role, "method", r.Method, "path", r.URL.Path)
			msg := "role " + role + " may not " + r.Method + " " + r.URL.Path
			if slices.Contains(a.readers, role) {
				msg += " (read-only role)"
			}
			writeError(w, adminapi.CodeForbidden, msg, "")
			return
		}
		next.ServeHTTP(w, r)
	})
}
