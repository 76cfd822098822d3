package testenv

import "testing"

// JavaArgs returns args (the arguments of a `java` command) behind JVM
// flags that put the JVM's temporary files in a directory of tb's, removed
// when tb ends. Java clients extract JNI libraries into java.io.tmpdir
// (/tmp): BookKeeper's native-io, which the Pulsar Java client pulls in,
// goes to /tmp/native<random>/libnative-io.so, netty's transports and
// Kafka's compression codecs to /tmp/lib*.so. They are meant to go by
// File.deleteOnExit, which a JVM killed at a test's deadline never runs
// and which left /tmp/native<random> behind even after a clean exit of the
// Pulsar Java client test.
func JavaArgs(tb testing.TB, args ...string) []string {
	dir := tb.TempDir()
	return append([]string{"-Djava.io.tmpdir=" + dir, "-Dio.netty.native.workdir=" + dir}, args...)
}
