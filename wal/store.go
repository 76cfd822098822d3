package wal

import (
	"context"
	"errors"
	"fmt"

	"github.com/nereusstream/nereus-go/objectstore"
)

// Store is the CAS read/commit handle for a manifest object. The writer uses
// Commit (PutUpdate against the version observed by Load); the reader uses
// Load to tail. It is deliberately thin: on a precondition failure the caller
// re-Loads to get the fresh version and replans.
//
// Anyone may mutate the manifest through a Store (a snapshotter calling
// SetSnapshot/TruncateThrough, a retention driver), provided it keeps the
// epoch it loaded and never appends: a live producer treats such a commit as
// a free re-plan, not as fencing.
type Store struct {
	os   objectstore.ObjectStore
	path string
}

// NewStore binds a Store to a manifest path in the given object store.
func NewStore(os objectstore.ObjectStore, path string) *Store {
	return &Store{os: os, path: path}
}

// Path returns the manifest object key.
func (s *Store) Path() string { return s.path }

// Load fetches and parses the manifest, returning its current version for use
// as a CAS precondition. If the manifest does not exist yet it returns a fresh
// empty manifest, a nil version, and ok=false. A manifest that fails its
// integrity check returns an error wrapping ErrCorrupt.
func (s *Store) Load(ctx context.Context) (m *Manifest, version *objectstore.UpdateVersion, ok bool, err error) {
	data, ver, err := s.os.Get(ctx, s.path)
	if err != nil {
		if errors.Is(err, objectstore.ErrNotFound) {
			return NewManifest(), nil, false, nil
		}
		return nil, nil, false, fmt.Errorf("nereus/wal: load manifest %s: %w", s.path, err)
	}
	m, err = ParseManifest(data)
	if err != nil {
		return nil, nil, false, fmt.Errorf("nereus/wal: manifest %s: %w", s.path, err)
	}
	return m, &ver, true, nil
}

// Create writes the manifest only if it does not already exist (PutCreate).
// Returns objectstore.ErrAlreadyExists if another writer created it first.
func (s *Store) Create(ctx context.Context, m *Manifest) error {
	_, err := s.put(ctx, m, nil)
	return err
}

// Commit writes the manifest only if its stored version still matches
// (PutUpdate). Returns objectstore.ErrPreconditionFailed on a lost CAS race;
// the caller should re-Load and replan. A nil version means Create. Any error
// other than the objectstore sentinels leaves the outcome unknown (see
// objectstore.Classify): re-Load to learn whether the write landed.
func (s *Store) Commit(ctx context.Context, m *Manifest, version *objectstore.UpdateVersion) error {
	_, err := s.put(ctx, m, version)
	return err
}

// put is Commit/Create returning the new version.
func (s *Store) put(ctx context.Context, m *Manifest, version *objectstore.UpdateVersion) (objectstore.UpdateVersion, error) {
	data, err := m.Bytes()
	if err != nil {
		return objectstore.UpdateVersion{}, err
	}
	opts := objectstore.PutOptions{Mode: objectstore.PutCreate}
	if version != nil {
		opts = objectstore.PutOptions{Mode: objectstore.PutUpdate, Version: *version}
	}
	return s.os.Put(ctx, s.path, data, opts)
}
