package kacl

import "testing"

func allow(rt ResourceType, name string, pt PatternType, principal string, op Operation) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: "*", Operation: op, Permission: PermissionAllow}
}

func deny(rt ResourceType, name string, pt PatternType, principal string, op Operation) Binding {
	b := allow(rt, name, pt, principal, op)
	b.Permission = PermissionDeny
	return b
}

func TestKafkaSemantics(t *testing.T) {
	a := New(Config{SuperUsers: []string{"User:admin"}})
	a.Set([]Binding{
		allow(ResourceTopic, "orders", PatternLiteral, "User:alice", OpRead),
		allow(ResourceTopic, "logs-", PatternPrefixed, "User:alice", OpWrite),
		deny(ResourceTopic, "logs-secret", PatternLiteral, "User:alice", OpAll),
		allow(ResourceTopic, "*", PatternLiteral, "User:bob", OpDescribe),
		allow(ResourceTopic, "public", PatternLiteral, "User:*", OpRead),
		{ResourceType: ResourceTopic, ResourceName: "hosted", PatternType: PatternLiteral, Principal: "User:carol", Host: "10.0.0.1", Operation: OpRead, Permission: PermissionAllow},
		allow(ResourceGroup, "g-", PatternPrefixed, "User:alice", OpRead),
		allow(ResourceCluster, ClusterName, PatternLiteral, "User:ops", OpAlterConfigs),
	})
	for _, c := range []struct {
		principal, host string
		op              Operation
		rt              ResourceType
		name            string
		want            bool
	}{
		{"User:admin", "1.2.3.4", OpDelete, ResourceTopic, "anything", true}, // super user
		{"User:alice", "1.2.3.4", OpRead, ResourceTopic, "orders", true},
		{"User:alice", "1.2.3.4", OpDescribe, ResourceTopic, "orders", true}, // READ implies DESCRIBE
		{"User:alice", "1.2.3.4", OpWrite, ResourceTopic, "orders", false},
		{"User:alice", "1.2.3.4", OpWrite, ResourceTopic, "logs-app", true},     // prefixed
		{"User:alice", "1.2.3.4", OpWrite, ResourceTopic, "logs-secret", false}, // deny ALL wins
		{"User:alice", "1.2.3.4", OpDescribe, ResourceTopic, "logs-secret", false},
		{"User:bob", "1.2.3.4", OpDescribe, ResourceTopic, "orders", true}, // wildcard resource
		{"User:bob", "1.2.3.4", OpRead, ResourceTopic, "orders", false},
		{"User:dave", "1.2.3.4", OpRead, ResourceTopic, "public", true}, // wildcard principal
		{"User:carol", "10.0.0.1", OpRead, ResourceTopic, "hosted", true},
		{"User:carol", "10.0.0.2", OpRead, ResourceTopic, "hosted", false},         // host
		{"User:alice", "1.2.3.4", OpRead, ResourceTopic, "nobody-has-acls", false}, // no ACL: deny by default
		{"User:alice", "1.2.3.4", OpRead, ResourceGroup, "g-1", true},
		{"User:alice", "1.2.3.4", OpDelete, ResourceGroup, "g-1", false},
		{"User:ops", "1.2.3.4", OpDescribeConfigs, ResourceCluster, ClusterName, true}, // ALTER_CONFIGS implies DESCRIBE_CONFIGS
		{"User:ops", "1.2.3.4", OpAlter, ResourceCluster, ClusterName, false},
	} {
		if got := a.Authorize(c.principal, c.host, c.op, c.rt, c.name); got != c.want {
			t.Errorf("%s@%s %s %s:%s = %v, want %v", c.principal, c.host, c.op, c.rt, c.name, got, c.want)
		}
	}
	open := New(Config{AllowIfNoACL: true})
	open.Set([]Binding{allow(ResourceTopic, "locked", PatternLiteral, "User:alice", OpRead)})
	if !open.Authorize("User:bob", "h", OpWrite, ResourceTopic, "free") || open.Authorize("User:bob", "h", OpRead, ResourceTopic, "locked") {
		t.Fatal("allow.everyone.if.no.acl.found applies only to resources without any ACL")
	}
	if got := a.AuthorizedOperations("User:alice", "h", ResourceTopic, "orders"); got != 1<<OpRead|1<<OpDescribe {
		t.Fatalf("authorized operations of alice on orders: %b", got)
	}
	if !a.AuthorizeAny("User:alice", "h", OpWrite, ResourceTopic) || a.AuthorizeAny("User:bob", "h", OpWrite, ResourceTopic) {
		t.Fatal("AuthorizeAny WRITE on topics")
	}
	a.Set(append([]Binding{deny(ResourceTopic, "*", PatternLiteral, "User:alice", OpWrite)}, allow(ResourceTopic, "x", PatternLiteral, "User:alice", OpWrite)))
	if a.AuthorizeAny("User:alice", "h", OpWrite, ResourceTopic) {
		t.Fatal("AuthorizeAny ignores a wildcard DENY")
	}
}

func TestFilters(t *testing.T) {
	orders := allow(ResourceTopic, "orders", PatternLiteral, "User:alice", OpRead)
	pref := allow(ResourceTopic, "ord", PatternPrefixed, "User:bob", OpWrite)
	wild := allow(ResourceTopic, "*", PatternLiteral, "User:bob", OpDescribe)
	name := "orders"
	bob := "User:bob"
	for _, c := range []struct {
		f    Filter
		want [3]bool
	}{
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}, [3]bool{true, true, true}},
		{Filter{ResourceType: ResourceTopic, ResourceName: &name, PatternType: PatternLiteral, Operation: OpAny, Permission: PermissionAny}, [3]bool{true, false, false}},
		{Filter{ResourceType: ResourceTopic, ResourceName: &name, PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}, [3]bool{true, true, true}},
		{Filter{ResourceType: ResourceTopic, PatternType: PatternPrefixed, Operation: OpAny, Permission: PermissionAny}, [3]bool{false, true, false}},
		{Filter{ResourceType: ResourceAny, PatternType: PatternAny, Principal: &bob, Operation: OpWrite, Permission: PermissionAllow}, [3]bool{false, true, false}},
		{Filter{ResourceType: ResourceGroup, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}, [3]bool{}},
	} {
		for i, b := range []Binding{orders, pref, wild} {
			if got := c.f.Matches(b); got != c.want[i] {
				t.Errorf("filter %+v on %v = %v", c.f, b, got)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	good := allow(ResourceTopic, "t", PatternLiteral, "User:alice", OpRead)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, mut := range []func(*Binding){
		func(b *Binding) { b.PatternType = PatternMatch },
		func(b *Binding) { b.Operation = OpAny },
		func(b *Binding) { b.Permission = PermissionAny },
		func(b *Binding) { b.ResourceName = "" },
		func(b *Binding) { b.Principal = "alice" },
		func(b *Binding) { b.ResourceType = ResourceCluster },
		func(b *Binding) { b.ResourceType = ResourceAny },
	} {
		b := good
		mut(&b)
		if err := b.Validate(); err == nil {
			t.Errorf("accepted %v", b)
		}
	}
}
