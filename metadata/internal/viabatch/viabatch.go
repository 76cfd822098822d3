// Package viabatch implements the single-key calls of metadata.Store (Get,
// Put, PutEphemeral, Delete) as one-op Batches, for stores whose Batch is
// already the one place a request is validated, applied and classified.
//
// It owns only that adaptation. It must never add semantics of its own: a
// single call behaves exactly as the corresponding one-op Batch.
package viabatch

import (
	"context"
	"fmt"

	"github.com/nereusstream/nereus-go/metadata"
)

// Batcher is the part of metadata.Store the helpers need.
type Batcher interface {
	Batch(ctx context.Context, ops []metadata.Op) ([]metadata.Result, error)
}

func one(ctx context.Context, b Batcher, op metadata.Op) (metadata.Result, error) {
	res, err := b.Batch(ctx, []metadata.Op{op})
	if err != nil {
		return metadata.Result{}, err
	}
	return res[0], res[0].Err
}

// Get is metadata.Store.Get as a one-op Batch.
func Get(ctx context.Context, b Batcher, key string) (metadata.Record, error) {
	r, err := one(ctx, b, metadata.Op{Kind: metadata.OpGet, Key: key})
	return r.Record, err
}

// Put is metadata.Store.Put as a one-op Batch.
func Put(ctx context.Context, b Batcher, key string, value []byte, expected metadata.Version) (metadata.Version, error) {
	r, err := one(ctx, b, metadata.Op{Kind: metadata.OpPut, Key: key, Value: value, Expected: expected})
	return r.Version, err
}

// ErrNoSession is PutEphemeral's answer to session 0.
var ErrNoSession = fmt.Errorf("%w: PutEphemeral needs a session", metadata.ErrInvalidArgument)

// PutEphemeral is metadata.Store.PutEphemeral as a one-op Batch.
func PutEphemeral(ctx context.Context, b Batcher, key string, value []byte, expected metadata.Version, session metadata.SessionID) (metadata.Version, error) {
	if session == 0 {
		return 0, ErrNoSession
	}
	r, err := one(ctx, b, metadata.Op{Kind: metadata.OpPut, Key: key, Value: value, Expected: expected, Session: session})
	return r.Version, err
}

// Delete is metadata.Store.Delete as a one-op Batch.
func Delete(ctx context.Context, b Batcher, key string, expected metadata.Version) error {
	_, err := one(ctx, b, metadata.Op{Kind: metadata.OpDelete, Key: key, Expected: expected})
	return err
}
