module github.com/nereusstream/nereus-go

go 1.26.8

require (
	github.com/apache/pulsar-client-go v0.19.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
