package objectstore_test

import (
	"context"
	"testing"

	"github.com/nereusstream/nereus-go/objectstore"
	"github.com/nereusstream/nereus-go/objectstore/memstore"
	"github.com/nereusstream/nereus-go/objectstore/objectstoretest"
)

// TestRoutedConformance runs the suite on two stores joined at prefixes
// that split its keys between them, so that listings over "" and "a"
// merge both stores and the rest read one.
func TestRoutedConformance(t *testing.T) {
	for _, prefix := range []string{"a/", "seg/run1/", "b"} {
		t.Run(prefix, func(t *testing.T) {
			objectstoretest.Run(t, func(t *testing.T) objectstore.ObjectStore {
				return objectstore.Route(memstore.New(), prefix, memstore.New())
			})
		})
	}
}

// TestRoutedHidesTheOtherStoresKeysUnderThePrefix: a key under the prefix
// that the rest store holds (an object left there before routing) is not
// listed, read or overwritten through the router.
func TestRoutedHidesTheOtherStoresKeysUnderThePrefix(t *testing.T) {
	ctx := context.Background()
	rest, routed := memstore.New(), memstore.New()
	if _, err := rest.Put(ctx, "wal/old", []byte("x"), objectstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	r := objectstore.Route(rest, "wal/", routed)
	for info, err := range r.List(ctx, "") {
		if err != nil || info.Key == "wal/old" {
			t.Fatalf("List yields %+v, %v", info, err)
		}
	}
	if _, _, err := r.Get(ctx, "wal/old"); err == nil {
		t.Fatal("Get through the router reads the rest store's key under the prefix")
	}
}
