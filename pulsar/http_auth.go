package pulsar

// Authentication and authorization of the HTTP lookup and admin paths, and
// Pulsar's permission-management paths:
//
//	GET    /admin/v2/namespaces/{tenant}/{ns}/permissions
//	POST   /admin/v2/namespaces/{tenant}/{ns}/permissions/{role}   (body ["produce","consume",...])
//	DELETE /admin/v2/namespaces/{tenant}/{ns}/permissions/{role}
//	GET    /admin/v2/{domain}/{tenant}/{ns}/{topic}/permissions
//	POST   /admin/v2/{domain}/{tenant}/{ns}/{topic}/permissions/{role}
//	DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}/permissions/{role}
//
// Every route is registered through authMux, which guards it with the
// permission its pattern needs (httpKinds; a route without an entry is for
// superusers only). Credentials are a bearer token (Authorization: Bearer
// <jwt>, what pulsar-admin and the clients' HTTP lookup send), a verified
// client certificate, or nothing (the anonymous role). Missing or invalid
// credentials answer 401, a role without permission 403, as Pulsar does.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nereusstream/nereus-go/managedledger"
)

// httpKind is what a route needs.
type httpKind uint8

const (
	kindSuperUser     httpKind = iota // superuser roles only
	kindAuthenticated                 // any authenticated role
	kindTenantAdmin                   // superuser or admin of {tenant}
	kindTopicLookup                   // produce/consume/lookup on the topic
	kindNamespaceAny                  // any permission in {tenant}/{ns}
)

var httpKinds = map[string]httpKind{
	"GET /lookup/v2/topic/{domain}/{tenant}/{ns}/{topic}":                                      kindTopicLookup,
	"GET /admin/v2/clusters":                                                                   kindAuthenticated,
	"GET /admin/v2/brokers/health":                                                             kindAuthenticated,
	"GET /admin/v2/tenants":                                                                    kindSuperUser,
	"GET /admin/v2/tenants/{tenant}":                                                           kindTenantAdmin,
	"GET /admin/v2/namespaces/{tenant}":                                                        kindTenantAdmin,
	"GET /admin/v2/namespaces/{tenant}/{ns}":                                                   kindTenantAdmin,
	"PUT /admin/v2/namespaces/{tenant}/{ns}":                                                   kindTenantAdmin,
	"DELETE /admin/v2/namespaces/{tenant}/{ns}":                                                kindTenantAdmin,
	"POST /admin/v2/namespaces/{tenant}/{ns}/deduplication":                                    kindTenantAdmin,
	"GET /admin/v2/namespaces/{tenant}/{ns}/topics":                                            kindNamespaceAny,
	"GET /admin/v2/namespaces/{tenant}/{ns}/retention":                                         kindTenantAdmin,
	"POST /admin/v2/namespaces/{tenant}/{ns}/retention":                                        kindTenantAdmin,
	"DELETE /admin/v2/namespaces/{tenant}/{ns}/retention":                                      kindTenantAdmin,
	"GET /admin/v2/namespaces/{tenant}/{ns}/storageProfile":                                    kindTenantAdmin,
	"POST /admin/v2/namespaces/{tenant}/{ns}/storageProfile":                                   kindTenantAdmin,
	"DELETE /admin/v2/namespaces/{tenant}/{ns}/storageProfile":                                 kindTenantAdmin,
	"GET /admin/v2/namespaces/{tenant}/{ns}/permissions":                                       kindTenantAdmin,
	"POST /admin/v2/namespaces/{tenant}/{ns}/permissions/{role}":                               kindTenantAdmin,
	"DELETE /admin/v2/namespaces/{tenant}/{ns}/permissions/{role}":                             kindTenantAdmin,
	"GET /admin/v2/schemas/{tenant}/{ns}/{topic}/schema":                                       kindTopicLookup,
	"GET /admin/v2/schemas/{tenant}/{ns}/{topic}/schema/{version}":                             kindTopicLookup,
	"DELETE /admin/v2/schemas/{tenant}/{ns}/{topic}/schema":                                    kindTenantAdmin,
	"GET /admin/v2/{domain}/{tenant}/{ns}":                                                     kindTenantAdmin,
	"GET /admin/v2/{domain}/{tenant}/{ns}/partitioned":                                         kindTenantAdmin,
	"PUT /admin/v2/{domain}/{tenant}/{ns}/{topic}":                                             kindTenantAdmin,
	"DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}":                                          kindTenantAdmin,
	"GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitions":                                  kindTopicLookup,
	"PUT /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitions":                                  kindTenantAdmin,
	"POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitions":                                 kindTenantAdmin,
	"DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitions":                               kindTenantAdmin,
	"GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/stats":                                       kindTopicLookup,
	"GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/partitioned-stats":                           kindTopicLookup,
	"GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscriptions":                               kindTopicLookup,
	"GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/lastMessageId":                               kindTopicLookup,
	"POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/terminate":                                  kindTenantAdmin,
	"POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}/skip_all":                kindTenantAdmin,
	"POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}/resetcursor/{timestamp}": kindTenantAdmin,
	"PUT /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}":                          kindTenantAdmin,
	"DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}/subscription/{sub}":                       kindTenantAdmin,
	"GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/permissions":                                 kindTenantAdmin,
	"POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/permissions/{role}":                         kindTenantAdmin,
	"DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}/permissions/{role}":                       kindTenantAdmin,
}

// authMux registers every route guarded by its httpKinds entry.
type authMux struct {
	*http.ServeMux
	a *httpAPI
	// nsPermission serves POST/DELETE namespaces/{t}/{ns}/permissions/{role}:
	// Pulsar's path collides, for net/http's router, with
	// {domain}/{tenant}/{ns}/{topic}/partitions, so ServeHTTP routes it.
	nsPermission map[string]http.HandlerFunc
}

func (a *httpAPI) newAuthMux() authMux {
	return authMux{ServeMux: http.NewServeMux(), a: a, nsPermission: map[string]http.HandlerFunc{}}
}

// ServeHTTP routes the namespace-permission paths, then the mux.
func (m authMux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h, ok := m.nsPermission[r.Method]; ok {
		// /admin/v2/namespaces/{tenant}/{ns}/permissions/{role}
		if rest, ok := strings.CutPrefix(r.URL.Path, "/admin/v2/namespaces/"); ok {
			if seg := strings.Split(rest, "/"); len(seg) == 4 && seg[2] == "permissions" && seg[0] != "" && seg[1] != "" && seg[3] != "" {
				r.SetPathValue("tenant", seg[0])
				r.SetPathValue("ns", seg[1])
				r.SetPathValue("role", seg[3])
				h(w, r)
				return
			}
		}
	}
	m.ServeMux.ServeHTTP(w, r)
}

// HandleFunc registers h at pattern behind the pattern's guard.
func (m authMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.ServeMux.HandleFunc(pattern, m.a.guard(pattern, h))
}

func (a *httpAPI) guard(pattern string, h http.HandlerFunc) http.HandlerFunc {
	kind, known := httpKinds[pattern]
	if !known {
		kind = kindSuperUser
	}
	return func(w http.ResponseWriter, r *http.Request) {
		auth := a.s.cfg.Auth
		if !auth.enabled() {
			h(w, r)
			return
		}
		id, err := a.s.authenticateHTTP(r)
		if err != nil {
			a.s.log.Info("pulsar HTTP authentication failed", "path", r.URL.Path, "err", err)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"reason": "Authentication required"})
			return
		}
		if auth.Authorization {
			ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
			ok, err := a.allowedHTTP(ctx, id.role, kind, r)
			cancel()
			if err != nil {
				writeErr(w, err)
				return
			}
			if !ok {
				a.s.log.Info("pulsar HTTP request not authorized", "path", r.URL.Path, "role", id.role)
				writeJSON(w, http.StatusForbidden, map[string]string{"reason": "Don't have permission to administrate resources on this tenant or topic"})
				return
			}
		}
		h(w, r)
	}
}

// authenticateHTTP: a bearer token, else a verified client certificate,
// else the anonymous role.
func (s *Server) authenticateHTTP(r *http.Request) (identity, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return identity{}, errBadAuthHeader
		}
		return s.authenticate(authToken, []byte(strings.TrimSpace(tok)), nil)
	}
	if s.cfg.Auth.provider(authTLS) && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		if cn := r.TLS.PeerCertificates[0].Subject.CommonName; cn != "" {
			return identity{role: cn, method: authTLS}, nil
		}
	}
	return s.authenticate("", nil, nil)
}

var errBadAuthHeader = newError(0, "Authorization header is not a bearer token")

func (a *httpAPI) allowedHTTP(ctx context.Context, role string, kind httpKind, r *http.Request) (bool, error) {
	s := a.s
	switch kind {
	case kindAuthenticated:
		return true, nil
	case kindSuperUser:
		return s.superUser(role), nil
	case kindTenantAdmin:
		return s.tenantAdmin(ctx, role, r.PathValue("tenant"))
	case kindNamespaceAny:
		return s.allowedNamespace(ctx, role, r.PathValue("tenant")+"/"+r.PathValue("ns"))
	case kindTopicLookup:
		domain := r.PathValue("domain")
		if domain == "" {
			domain = "persistent"
		}
		name, err := managedledger.ParseTopicName(domain + "://" + r.PathValue("tenant") + "/" + r.PathValue("ns") + "/" + r.PathValue("topic"))
		if err != nil {
			return s.tenantAdmin(ctx, role, r.PathValue("tenant")) // the handler answers the bad name
		}
		return s.allowedTopic(ctx, role, name, actionLookup)
	}
	return false, nil
}

// validActions are Pulsar's AuthActions.
var validActions = []string{"produce", "consume", "functions", "sources", "sinks", "packages"}

func (a *httpAPI) readActions(w http.ResponseWriter, r *http.Request) ([]string, bool) {
	var actions []string
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err == nil {
		err = json.Unmarshal(body, &actions)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"reason": "body: want a JSON array of actions"})
		return nil, false
	}
	for _, act := range actions {
		if !slices.Contains(validActions, act) {
			writeJSON(w, http.StatusBadRequest, map[string]string{"reason": "unknown action " + act + " (want " + strings.Join(validActions, ", ") + ")"})
			return nil, false
		}
	}
	sort.Strings(actions)
	return slices.Compact(actions), true
}

func (a *httpAPI) registerPermissionRoutes(mux authMux) {
	mux.HandleFunc("GET /admin/v2/namespaces/{tenant}/{ns}/permissions", a.getNamespacePermissions)
	mux.nsPermission[http.MethodPost] = a.guard("POST /admin/v2/namespaces/{tenant}/{ns}/permissions/{role}", a.grantNamespacePermission)
	mux.nsPermission[http.MethodDelete] = a.guard("DELETE /admin/v2/namespaces/{tenant}/{ns}/permissions/{role}", a.revokeNamespacePermission)
	mux.HandleFunc("GET /admin/v2/{domain}/{tenant}/{ns}/{topic}/permissions", a.getTopicPermissions)
	mux.HandleFunc("POST /admin/v2/{domain}/{tenant}/{ns}/{topic}/permissions/{role}", a.grantTopicPermission)
	mux.HandleFunc("DELETE /admin/v2/{domain}/{tenant}/{ns}/{topic}/permissions/{role}", a.revokeTopicPermission)
}

func namespaceOf(r *http.Request) string { return r.PathValue("tenant") + "/" + r.PathValue("ns") }

func (a *httpAPI) updateAuth(w http.ResponseWriter, r *http.Request, namespace string, change func(*managedledger.AuthPolicies)) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	err := a.s.ml.SetNamespacePolicies(ctx, namespace, func(p *managedledger.NamespacePolicies) {
		if p.AuthPolicies == nil {
			p.AuthPolicies = &managedledger.AuthPolicies{}
		}
		if p.AuthPolicies.NamespaceAuth == nil {
			p.AuthPolicies.NamespaceAuth = map[string][]string{}
		}
		if p.AuthPolicies.DestinationAuth == nil {
			p.AuthPolicies.DestinationAuth = map[string]map[string][]string{}
		}
		change(p.AuthPolicies)
	})
	if err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *httpAPI) getNamespacePermissions(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.ctx(r)
	defer cancel()
	pol, err := a.s.ml.GetNamespace(ctx, namespaceOf(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	out := map[string][]string{}
	if pol.AuthPolicies != nil {
		for role, acts := range pol.AuthPolicies.NamespaceAuth {
			out[role] = acts
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *httpAPI) grantNamespacePermission(w http.ResponseWriter, r *http.Request) {
	actions, ok := a.readActions(w, r)
	if !ok {
		return
	}
	role := r.PathValue("role")
	a.updateAuth(w, r, namespaceOf(r), func(ap *managedledger.AuthPolicies) { ap.NamespaceAuth[role] = actions })
	a.s.log.Info("pulsar namespace permission granted", "namespace", namespaceOf(r), "role", role, "actions", actions)
}

func (a *httpAPI) revokeNamespacePermission(w http.ResponseWriter, r *http.Request) {
	role := r.PathValue("role")
	a.updateAuth(w, r, namespaceOf(r), func(ap *managedledger.AuthPolicies) { delete(ap.NamespaceAuth, role) })
}

func (a *httpAPI) getTopicPermissions(w http.ResponseWriter, r *http.Request) {
	name, ok := a.topicName(w, r)
	if !ok {
		return
	}
	ctx, cancel := a.ctx(r)
	defer cancel()
	pol, err := a.s.ml.GetNamespace(ctx, name.NamespaceName())
	if err != nil {
		writeErr(w, err)
		return
	}
	// Pulsar answers the namespace's grants merged with the topic's own.
	out := map[string][]string{}
	if ap := pol.AuthPolicies; ap != nil {
		for role, acts := range ap.NamespaceAuth {
			out[role] = append(out[role], acts...)
		}
		for role, acts := range ap.DestinationAuth[name.Base().String()] {
			out[role] = append(out[role], acts...)
		}
	}
	for role, acts := range out {
		sort.Strings(acts)
		out[role] = slices.Compact(acts)
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *httpAPI) grantTopicPermission(w http.ResponseWriter, r *http.Request) {
	name, ok := a.topicName(w, r)
	if !ok {
		return
	}
	actions, ok := a.readActions(w, r)
	if !ok {
		return
	}
	role, topic := r.PathValue("role"), name.Base().String()
	a.updateAuth(w, r, name.NamespaceName(), func(ap *managedledger.AuthPolicies) {
		if ap.DestinationAuth[topic] == nil {
			ap.DestinationAuth[topic] = map[string][]string{}
		}
		ap.DestinationAuth[topic][role] = actions
	})
	a.s.log.Info("pulsar topic permission granted", "topic", topic, "role", role, "actions", actions)
}

func (a *httpAPI) revokeTopicPermission(w http.ResponseWriter, r *http.Request) {
	name, ok := a.topicName(w, r)
	if !ok {
		return
	}
	role, topic := r.PathValue("role"), name.Base().String()
	a.updateAuth(w, r, name.NamespaceName(), func(ap *managedledger.AuthPolicies) {
		delete(ap.DestinationAuth[topic], role)
		if len(ap.DestinationAuth[topic]) == 0 {
			delete(ap.DestinationAuth, topic)
		}
	})
}
