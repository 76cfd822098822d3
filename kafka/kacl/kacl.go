// Package kacl is Kafka's authorizer as a pure decision over a set of ACL
// bindings, with the semantics of Apache Kafka's StandardAuthorizer:
//
//   - a binding is (resource type, resource name, pattern LITERAL or
//     PREFIXED, principal, host, operation, permission ALLOW or DENY);
//     LITERAL "*" matches every resource of its type, principal "User:*"
//     every principal, host "*" every host;
//   - super users are allowed everything;
//   - a matching DENY for the operation (or ALL) wins over any ALLOW;
//   - an ALLOW for the operation (or ALL) allows it, and so does an ALLOW
//     of an operation that implies it: READ, WRITE, DELETE and ALTER imply
//     DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS;
//   - when no binding at all matches the resource, the answer is
//     allow.everyone.if.no.acl.found (default false: deny).
//
// It also holds the filter semantics of DescribeAcls / DeleteAcls (ANY,
// MATCH) and the authorized-operations bitfields Kafka reports.
//
// It must never do I/O or keep state beyond the bindings it is given
// (kafka/kauth persists them).
package kacl

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// ResourceType is Kafka's AclResourceType.
type ResourceType int8

// Resource types (wire values).
const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// ClusterName is the one cluster resource's name ("kafka-cluster").
const ClusterName = "kafka-cluster"

// PatternType is Kafka's PatternType.
type PatternType int8

// Pattern types (wire values).
const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is Kafka's AclOperation.
type Operation int8

// Operations (wire values; also the bit numbers of authorized-operations
// bitfields).
const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
	OpTwoPhaseCommit  Operation = 15
)

// Permission is Kafka's AclPermissionType.
type Permission int8

// Permissions (wire values).
const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1
	PermissionDeny    Permission = 2
	PermissionAllow   Permission = 3
)

// Wildcards.
const (
	WildcardResource  = "*"
	WildcardPrincipal = "User:*"
	WildcardHost      = "*"
)

// Binding is one ACL.
type Binding struct {
	ResourceType ResourceType `json:"resourceType"`
	ResourceName string       `json:"resourceName"`
	PatternType  PatternType  `json:"patternType"`
	Principal    string       `json:"principal"`
	Host         string       `json:"host"`
	Operation    Operation    `json:"operation"`
	Permission   Permission   `json:"permission"`
}

func (b Binding) String() string {
	return fmt.Sprintf("(principal=%s, host=%s, op=%s, perm=%s) on %s:%s:%s", b.Principal, b.Host, b.Operation, b.Permission,
		b.ResourceType, b.PatternType, b.ResourceName)
}

// Validate checks a binding for CreateAcls, with Kafka's messages. The
// caller answers INVALID_REQUEST with the error text.
func (b Binding) Validate() error {
	switch b.ResourceType {
	case ResourceTopic, ResourceGroup, ResourceCluster, ResourceTransactionalID, ResourceDelegationToken, ResourceUser:
	default:
		return invalid("Invalid resource type %s", b.ResourceType)
	}
	if b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed {
		return invalid("Invalid patternType %s", b.PatternType)
	}
	if b.ResourceName == "" {
		return invalid("Resource name should not be empty")
	}
	if b.ResourceType == ResourceCluster && (b.ResourceName != ClusterName || b.PatternType != PatternLiteral) {
		return invalid("The only valid name for the CLUSTER resource is %s", ClusterName)
	}
	if b.Operation <= OpAny || b.Operation > OpTwoPhaseCommit {
		return invalid("Invalid operation %s", b.Operation)
	}
	if b.Permission != PermissionAllow && b.Permission != PermissionDeny {
		return invalid("Invalid permissionType %s", b.Permission)
	}
	typ, name, ok := strings.Cut(b.Principal, ":")
	if !ok || typ == "" || name == "" {
		return invalid("Could not parse principal from `%s` (no colon is present separating the principal type from the principal name)", b.Principal)
	}
	if b.Host == "" {
		return invalid("Invalid host: empty")
	}
	return nil
}

// invalidError carries Kafka's message for an invalid ACL or filter (the
// client sees it with INVALID_REQUEST).
type invalidError struct{ msg string }

func (e *invalidError) Error() string { return e.msg }

func invalid(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

// Filter selects bindings (DescribeAcls, DeleteAcls). Nil strings match
// anything; PatternMatch matches every pattern that would match the named
// resource (LITERAL equal, LITERAL "*", PREFIXED prefixes).
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Matches reports whether the filter selects b.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	switch f.PatternType {
	case PatternAny:
		if f.ResourceName != nil && *f.ResourceName != b.ResourceName {
			return false
		}
	case PatternMatch:
		if f.ResourceName != nil && !patternMatches(b, *f.ResourceName) {
			return false
		}
	default:
		if f.PatternType != b.PatternType || (f.ResourceName != nil && *f.ResourceName != b.ResourceName) {
			return false
		}
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	if f.Permission != PermissionAny && f.Permission != b.Permission {
		return false
	}
	return true
}

// ValidateFilter checks a DescribeAcls/DeleteAcls filter.
func (f Filter) Validate() error {
	if f.ResourceType == ResourceUnknown || f.ResourceType > ResourceUser || f.ResourceType < 0 {
		return invalid("Invalid resource type %s", f.ResourceType)
	}
	if f.PatternType == PatternUnknown || f.PatternType > PatternPrefixed || f.PatternType < 0 {
		return invalid("Invalid pattern type %s", f.PatternType)
	}
	if f.Operation == OpUnknown || f.Operation > OpTwoPhaseCommit || f.Operation < 0 {
		return invalid("Invalid operation %s", f.Operation)
	}
	if f.Permission == PermissionUnknown || f.Permission > PermissionAllow || f.Permission < 0 {
		return invalid("Invalid permission type %s", f.Permission)
	}
	return nil
}

// patternMatches: does binding b's resource pattern cover resource name?
func patternMatches(b Binding, name string) bool {
	switch b.PatternType {
	case PatternLiteral:
		return b.ResourceName == name || b.ResourceName == WildcardResource
	case PatternPrefixed:
		return strings.HasPrefix(name, b.ResourceName)
	}
	return false
}

// Config is the authorizer's static configuration.
type Config struct {
	// SuperUsers are principals allowed everything ("User:admin").
	SuperUsers []string
	// AllowIfNoACL is allow.everyone.if.no.acl.found.
	AllowIfNoACL bool
}

// Authorizer decides requests against a binding set. It is safe for
// concurrent use; Set replaces the set atomically.
type Authorizer struct {
	cfg   Config
	super map[string]bool

	mu     sync.RWMutex
	byType map[ResourceType][]Binding
}

// New returns an authorizer with no bindings.
func New(cfg Config) *Authorizer {
	a := &Authorizer{cfg: cfg, super: map[string]bool{}, byType: map[ResourceType][]Binding{}}
	for _, s := range cfg.SuperUsers {
		a.super[s] = true
	}
	return a
}

// Set replaces the bindings.
func (a *Authorizer) Set(bs []Binding) {
	m := map[ResourceType][]Binding{}
	for _, b := range bs {
		m[b.ResourceType] = append(m[b.ResourceType], b)
	}
	a.mu.Lock()
	a.byType = m
	a.mu.Unlock()
}

// SuperUser reports whether principal is a super user.
func (a *Authorizer) SuperUser(principal string) bool { return a.super[principal] }

// Authorize decides one (principal, host, operation, resource).
func (a *Authorizer) Authorize(principal, host string, op Operation, rt ResourceType, name string) bool {
	if a.super[principal] {
		return true
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	return decide(a.byType[rt], principal, host, op, name, a.cfg.AllowIfNoACL)
}

func decide(bs []Binding, principal, host string, op Operation, name string, allowIfNone bool) bool {
	found, allowed := false, false
	for _, b := range bs {
		if !patternMatches(b, name) {
			continue
		}
		found = true
		if b.Principal != principal && b.Principal != WildcardPrincipal {
			continue
		}
		if b.Host != host && b.Host != WildcardHost {
			continue
		}
		switch b.Permission {
		case PermissionDeny:
			if b.Operation == op || b.Operation == OpAll {
				return false
			}
		case PermissionAllow:
			if implies(b.Operation, op) {
				allowed = true
			}
		}
	}
	if !found {
		return allowIfNone
	}
	return allowed
}

// implies reports whether an ALLOW of have grants want.
func implies(have, want Operation) bool {
	if have == want || have == OpAll {
		return true
	}
	switch want {
	case OpDescribe:
		return have == OpRead || have == OpWrite || have == OpDelete || have == OpAlter
	case OpDescribeConfigs:
		return have == OpAlterConfigs
	}
	return false
}

// AuthorizeAny reports whether principal may perform op on at least one
// resource of type rt (Kafka's authorizeByResourceType, used for
// idempotent producers without IDEMPOTENT_WRITE): a super user, an ALLOW
// for the principal not covered by a DENY on the same pattern or a
// wildcard, or no binding of the type at all with AllowIfNoACL.
func (a *Authorizer) AuthorizeAny(principal, host string, op Operation, rt ResourceType) bool {
	if a.super[principal] {
		return true
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	bs := a.byType[rt]
	if len(bs) == 0 {
		return a.cfg.AllowIfNoACL
	}
	applies := func(b Binding) bool {
		return (b.Principal == principal || b.Principal == WildcardPrincipal) && (b.Host == host || b.Host == WildcardHost)
	}
	for _, b := range bs {
		if b.Permission == PermissionDeny && applies(b) && (b.Operation == op || b.Operation == OpAll) &&
			b.PatternType == PatternLiteral && b.ResourceName == WildcardResource {
			return false
		}
	}
	for _, allow := range bs {
		if allow.Permission != PermissionAllow || !applies(allow) || !implies(allow.Operation, op) {
			continue
		}
		denied := false
		for _, d := range bs {
			if d.Permission == PermissionDeny && applies(d) && (d.Operation == op || d.Operation == OpAll) &&
				coversPattern(d, allow) {
				denied = true
				break
			}
		}
		if !denied {
			return true
		}
	}
	return false
}

// coversPattern: does deny's pattern cover every resource allow's does?
func coversPattern(deny, allow Binding) bool {
	switch deny.PatternType {
	case PatternLiteral:
		return deny.ResourceName == WildcardResource || (allow.PatternType == PatternLiteral && allow.ResourceName == deny.ResourceName)
	case PatternPrefixed:
		return strings.HasPrefix(allow.ResourceName, deny.ResourceName)
	}
	return false
}

// Operations each resource type supports, for authorized-operations
// bitfields (Kafka's AclEntry.supportedOperations).
var supported = map[ResourceType][]Operation{
	ResourceTopic:           {OpRead, OpWrite, OpCreate, OpDescribe, OpDelete, OpAlter, OpDescribeConfigs, OpAlterConfigs},
	ResourceGroup:           {OpRead, OpDescribe, OpDelete},
	ResourceCluster:         {OpCreate, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite, OpAlter, OpDescribe},
	ResourceTransactionalID: {OpDescribe, OpWrite, OpTwoPhaseCommit},
	ResourceDelegationToken: {OpDescribe},
	ResourceUser:            {OpCreateTokens, OpDescribeTokens},
}

// AuthorizedOperations is the bitfield (bit n = operation n) of the
// supported operations principal may perform on the resource.
func (a *Authorizer) AuthorizedOperations(principal, host string, rt ResourceType, name string) int32 {
	var bits int32
	for _, op := range supported[rt] {
		if a.Authorize(principal, host, op, rt, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// Sorted returns bindings in a stable order (resource type, name,
// pattern, principal, host, operation, permission).
func Sorted(bs []Binding) []Binding {
	out := append([]Binding(nil), bs...)
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.ResourceType != b.ResourceType:
			return a.ResourceType < b.ResourceType
		case a.ResourceName != b.ResourceName:
			return a.ResourceName < b.ResourceName
		case a.PatternType != b.PatternType:
			return a.PatternType < b.PatternType
		case a.Principal != b.Principal:
			return a.Principal < b.Principal
		case a.Host != b.Host:
			return a.Host < b.Host
		case a.Operation != b.Operation:
			return a.Operation < b.Operation
		}
		return a.Permission < b.Permission
	})
	return out
}

var resourceNames = map[ResourceType]string{ResourceUnknown: "UNKNOWN", ResourceAny: "ANY", ResourceTopic: "TOPIC", ResourceGroup: "GROUP",
	ResourceCluster: "CLUSTER", ResourceTransactionalID: "TRANSACTIONAL_ID", ResourceDelegationToken: "DELEGATION_TOKEN", ResourceUser: "USER"}

func (r ResourceType) String() string {
	if n, ok := resourceNames[r]; ok {
		return n
	}
	return fmt.Sprintf("ResourceType(%d)", int8(r))
}

var patternNames = map[PatternType]string{PatternUnknown: "UNKNOWN", PatternAny: "ANY", PatternMatch: "MATCH", PatternLiteral: "LITERAL", PatternPrefixed: "PREFIXED"}

func (p PatternType) String() string {
	if n, ok := patternNames[p]; ok {
		return n
	}
	return fmt.Sprintf("PatternType(%d)", int8(p))
}

var opNames = map[Operation]string{OpUnknown: "UNKNOWN", OpAny: "ANY", OpAll: "ALL", OpRead: "READ", OpWrite: "WRITE", OpCreate: "CREATE",
	OpDelete: "DELETE", OpAlter: "ALTER", OpDescribe: "DESCRIBE", OpClusterAction: "CLUSTER_ACTION", OpDescribeConfigs: "DESCRIBE_CONFIGS",
	OpAlterConfigs: "ALTER_CONFIGS", OpIdempotentWrite: "IDEMPOTENT_WRITE", OpCreateTokens: "CREATE_TOKENS", OpDescribeTokens: "DESCRIBE_TOKENS",
	OpTwoPhaseCommit: "TWO_PHASE_COMMIT"}

func (o Operation) String() string {
	if n, ok := opNames[o]; ok {
		return n
	}
	return fmt.Sprintf("Operation(%d)", int8(o))
}

var permNames = map[Permission]string{PermissionUnknown: "UNKNOWN", PermissionAny: "ANY", PermissionDeny: "DENY", PermissionAllow: "ALLOW"}

func (p Permission) String() string {
	if n, ok := permNames[p]; ok {
		return n
	}
	return fmt.Sprintf("Permission(%d)", int8(p))
}
