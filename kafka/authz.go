package kafka

import (
	"fmt"
	"math"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/nereusstream/nereus-go/kafka/kacl"
)

// Authorization is one check in the request path, not a check in every
// handler: conn.handleFrame calls authorize after the authentication gate
// and before the handler. Each API key has a rule (authz_rules.go) that
// extracts the resources its request names and decides, with Kafka's
// semantics (kafka/kacl), what the principal may touch:
//
//   - a request the principal may not make at all is answered by the rule
//     (deny) and its handler never runs (JoinGroup without READ on the
//     group: GROUP_AUTHORIZATION_FAILED);
//   - a multi-resource request is filtered: unauthorized topics,
//     partitions or groups are removed from the request before the
//     handler sees it, and patch adds their error entries
//     (TOPIC_AUTHORIZATION_FAILED, ...) to the handler's answer, and fills
//     in authorized_operations bitfields; if nothing is left, the handler
//     does not run either (empty);
//   - the authorizer never tells a principal whether a resource it may not
//     describe exists.
//
// A registered API key without a rule is refused to everyone but super
// users (TestEveryAPIHasAnAuthorizationRule keeps the table complete).

// authzDecision is a rule's verdict on one request.
type authzDecision struct {
	// deny, when set, is the answer; the handler does not run.
	deny kmsg.Response
	// patch adjusts the handler's answer (or, with empty, the blank one).
	patch func(kmsg.Response)
	// empty: nothing authorized is left; answer a blank response, patched.
	empty bool
	// closeConn closes the connection after the (patched) request ran:
	// an acks=0 produce naming a topic it may not write to (Kafka closes
	// those too: the client gets no answer to see the error in).
	closeConn bool
	// refuse closes the connection without running anything (an API
	// without an authorization rule, for anyone but a super user).
	refuse bool
}

type authzRule func(z *authzCtx) authzDecision

var authzRules = map[int16]authzRule{}

// regAuthz registers the authorization rule of an API key.
func regAuthz(key int16, rule authzRule) {
	if _, dup := authzRules[key]; dup {
		panic(fmt.Sprintf("kafka: authorization rule for key %d registered twice", key))
	}
	authzRules[key] = rule
}

// authzCtx is what a rule sees.
type authzCtx struct {
	r         *request
	principal string
	host      string
	a         *kacl.Authorizer
}

// ok reports whether the principal may perform op on the resource.
func (z *authzCtx) ok(op kacl.Operation, rt kacl.ResourceType, name string) bool {
	return z.a.Authorize(z.principal, z.host, op, rt, name)
}

func (z *authzCtx) cluster(op kacl.Operation) bool {
	return z.ok(op, kacl.ResourceCluster, kacl.ClusterName)
}

// ops is an authorized-operations bitfield for a resource.
func (z *authzCtx) ops(rt kacl.ResourceType, name string) int32 {
	return z.a.AuthorizedOperations(z.principal, z.host, rt, name)
}

// authorize runs the request's rule; a nil decision means no
// authorization is configured.
func (c *conn) authorize(r *request) *authzDecision {
	a := c.s.authz
	if a == nil {
		return nil
	}
	z := &authzCtx{r: r, principal: c.auth.principal, host: c.host, a: a}
	rule, ok := authzRules[r.hdr.key]
	if !ok {
		if a.SuperUser(z.principal) {
			return &authzDecision{}
		}
		c.s.log.Warn("kafka: request refused: no authorization rule for this API", "api", kmsg.NameForKey(r.hdr.key), "principal", z.principal)
		return &authzDecision{refuse: true}
	}
	d := rule(z)
	return &d
}

// hostOf is the client address ACL host matching uses.
func hostOf(nc net.Conn) string {
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	h, _, _ := net.SplitHostPort(nc.RemoteAddr().String())
	return h
}

// noAuthorizedOps is what authorized-operations fields carry when the
// client did not ask for them.
const noAuthorizedOps = math.MinInt32
