package wal

import "github.com/nereusstream/nereus-go/internal/simrt"

// Runtime is what the producer takes from the outside world besides the
// object store: the clock, timers, goroutines and randomness. The default
// (ProducerConfig.Runtime nil) is the wall clock, time.AfterFunc, the go
// statement and crypto/rand — behaviour unchanged. A deterministic
// simulator supplies its own: then every goroutine, sleep and clock read
// of the producer goes through it, so a run replays from a seed. Its
// contract (Block before every wait, fixed select choices) is the shared
// seam's: see package internal/simrt.
type Runtime = simrt.Runtime

// rt is the producer's runtime with the real one as default.
type rt = simrt.RT

// RealRuntime returns the default runtime (for packages that wrap the
// producer and need the same clock and goroutines).
func RealRuntime() Runtime { return simrt.Real() }
