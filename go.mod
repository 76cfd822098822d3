module github.com/nereusstream/nereus-go

go 1.26.8
