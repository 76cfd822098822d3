// Package pb holds the generated Go types of the Pulsar binary protocol
// messages Nereus speaks (see pulsar_api.proto for what is declared and why).
// It contains no logic and must never import anything but the protobuf
// runtime.
package pb

//go:generate protoc --go_out=. --go_opt=paths=source_relative pulsar_api.proto
