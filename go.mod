module github.com/nereusstream/nereus-go

go 1.26.8

require (
	github.com/go-zookeeper/zk v1.0.4 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
