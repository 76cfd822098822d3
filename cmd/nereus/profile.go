package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
)

// cpuProfileEnv names a file that `nereus serve` writes a CPU profile of
// its whole run to (a diagnostic for benchmarks: bench/lifecyclebench
// -lcbench.cpuprofile sets it). Unset, nothing is profiled.
const cpuProfileEnv = "NEREUS_DEBUG_CPU_PROFILE"

// startCPUProfile starts profiling when cpuProfileEnv is set and returns the
// function that stops it and closes the file.
func startCPUProfile(lookup func(string) (string, bool), stderr io.Writer) func() {
	path, ok := lookup(cpuProfileEnv)
	if !ok || path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(stderr, "nereus: %s: %v\n", cpuProfileEnv, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(stderr, "nereus: %s: %v\n", cpuProfileEnv, err)
		_ = f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}
