package listener

import (
	"crypto/tls"
	"io"
	"net"
	"testing"

	"github.com/nereusstream/nereus-go/internal/testenv/certs"
)

// BenchmarkLoopbackCopy measures what a listener's transport costs per
// byte: 1 MiB writes through a loopback connection accepted by Listen,
// plaintext versus TLS (the server side decrypts, as a broker reading
// produce requests does). b.SetBytes makes `go test -bench` report MB/s.
//
//	go test -run '^$' -bench LoopbackCopy ./listener
func BenchmarkLoopbackCopy(b *testing.B) {
	cs, err := certs.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	src, err := NewSource(TLSFiles{CertFile: cs.CertFile, KeyFile: cs.KeyFile}, quietLog())
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		sec  Security
	}{{"plaintext", Security{}}, {"tls", Security{TLS: true}}} {
		b.Run(tc.name, func(b *testing.B) {
			ln, err := Listen(Spec{Protocol: Kafka, Name: "X", Security: tc.sec, Bind: "127.0.0.1:0"}, src)
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			done := make(chan int64, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					done <- 0
					return
				}
				defer c.Close()
				if err := Handshake(c, 0); err != nil {
					done <- 0
					return
				}
				n, _ := io.Copy(io.Discard, c)
				done <- n
			}()
			var c net.Conn
			if tc.sec.TLS {
				cfg, _ := cs.ClientConfig("", "")
				c, err = tls.Dial("tcp", ln.Addr().String(), cfg)
			} else {
				c, err = net.Dial("tcp", ln.Addr().String())
			}
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 1<<20)
			b.SetBytes(int64(len(buf)))
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
			c.Close()
			<-done
		})
	}
}
