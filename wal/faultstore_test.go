package wal

import (
	"context"
	"errors"
	"iter"
	"strings"
	"sync"

	"github.com/nereusstream/nereus-go/objectstore"
)

// errInjected is a transport-shaped error: objectstore.Classify says Unknown.
var errInjected = errors.New("injected transport failure")

// fault says what happens to one call.
type fault uint8

const (
	pass      fault = iota
	failClean       // return errInjected, do nothing
	failAfter       // do the call, then return errInjected (response lost)
)

// faultStore wraps a store and lets a test decide per call what happens. The
// rule runs under a mutex, so it may keep simple counters. Tests only.
type faultStore struct {
	inner objectstore.ObjectStore

	mu    sync.Mutex
	rule  func(op, key string) fault
	calls map[string]int       // "op key-class" -> count
	gate  func(op, key string) // called (outside the lock) before the call; may block
}

func newFaultStore(inner objectstore.ObjectStore) *faultStore {
	return &faultStore{inner: inner, calls: map[string]int{}}
}

func (f *faultStore) setRule(rule func(op, key string) fault) {
	f.mu.Lock()
	f.rule = rule
	f.mu.Unlock()
}

func (f *faultStore) setGate(gate func(op, key string)) {
	f.mu.Lock()
	f.gate = gate
	f.mu.Unlock()
}

func (f *faultStore) count(op, key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op+" "+keyClass(key)]
}

// keyClass groups keys: "manifest", "segment", "cursor" or the key itself.
func keyClass(key string) string {
	switch {
	case strings.Contains(key, ".cursors/"):
		return "cursor"
	case strings.Contains(key, ".segments/"):
		return "segment"
	case strings.HasSuffix(key, "manifest"):
		return "manifest"
	}
	return key
}

func (f *faultStore) decide(op, key string) fault {
	f.mu.Lock()
	f.calls[op+" "+keyClass(key)]++
	rule, gate := f.rule, f.gate
	var d fault
	if rule != nil {
		d = rule(op, key)
	}
	f.mu.Unlock()
	if gate != nil {
		gate(op, key)
	}
	return d
}

func (f *faultStore) Get(ctx context.Context, key string) ([]byte, objectstore.UpdateVersion, error) {
	switch f.decide("get", key) {
	case failClean, failAfter:
		return nil, objectstore.UpdateVersion{}, errInjected
	}
	return f.inner.Get(ctx, key)
}

func (f *faultStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	switch f.decide("getrange", key) {
	case failClean, failAfter:
		return nil, errInjected
	}
	return f.inner.GetRange(ctx, key, off, n)
}

func (f *faultStore) Head(ctx context.Context, key string) (objectstore.ObjectInfo, error) {
	switch f.decide("head", key) {
	case failClean, failAfter:
		return objectstore.ObjectInfo{}, errInjected
	}
	return f.inner.Head(ctx, key)
}

func (f *faultStore) Put(ctx context.Context, key string, data []byte, opts objectstore.PutOptions) (objectstore.UpdateVersion, error) {
	switch f.decide("put", key) {
	case failClean:
		return objectstore.UpdateVersion{}, errInjected
	case failAfter:
		if _, err := f.inner.Put(ctx, key, data, opts); err != nil {
			return objectstore.UpdateVersion{}, err
		}
		return objectstore.UpdateVersion{}, errInjected
	}
	return f.inner.Put(ctx, key, data, opts)
}

func (f *faultStore) Delete(ctx context.Context, key string, ifVersion *objectstore.UpdateVersion) error {
	switch f.decide("delete", key) {
	case failClean:
		return errInjected
	case failAfter:
		if err := f.inner.Delete(ctx, key, ifVersion); err != nil {
			return err
		}
		return errInjected
	}
	return f.inner.Delete(ctx, key, ifVersion)
}

func (f *faultStore) List(ctx context.Context, prefix string) iter.Seq2[objectstore.ObjectInfo, error] {
	if f.decide("list", prefix) != pass {
		return func(yield func(objectstore.ObjectInfo, error) bool) { yield(objectstore.ObjectInfo{}, errInjected) }
	}
	return f.inner.List(ctx, prefix)
}
