package main

import "testing"

// TestRun keeps the example runnable: it replicates and checks convergence.
func TestRun(t *testing.T) {
	if err := run(t.TempDir(), 600); err != nil {
		t.Fatal(err)
	}
}
