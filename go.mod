module github.com/nereusstream/nereus-go

go 1.26.8

require (
	github.com/anishathalye/porcupine v1.3.1
	go.etcd.io/bbolt v1.5.0
)

require golang.org/x/sys v0.45.0 // indirect
