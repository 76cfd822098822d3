package catchupbench

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// dropCaches writes back dirty pages and drops the whole page cache (and
// dentries and inodes), so the next read of the backlog or of the plain
// file comes from the device: the cold case, a backlog that aged out of
// memory. It needs root; a bench asked for -catchup.cold that cannot drop
// the cache fails rather than print a warm figure as a cold one. It
// slows every other process on the machine for a moment (their files are
// dropped too), so it runs only right before a measured read.
func dropCaches(t *testing.T) {
	t.Helper()
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
		t.Fatalf("-catchup.cold: cannot drop the page cache (needs root and a writable /proc/sys/vm/drop_caches): %v", err)
	}
}

// deviceReadBytes is read_bytes of /proc/self/io: the bytes this process
// caused to be read from block devices (page-cache misses). Around a cold
// pass it shows the pass really read from the device (in a VM the host
// may still serve them from its own cache: the guest cannot tell).
func deviceReadBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "read_bytes: "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return -1
}

// device is the st_dev of path: the plain file and the fsstore data dir
// must be on one file system for the file read to be the baseline.
func device(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return uint64(st.Dev)
}

// blockStat is the read side of a block device's /sys/dev/block/M:m/stat:
// requests completed, 512-byte sectors read, and milliseconds requests
// spent in the device (summed over requests, so ticks ÷ wall time is the
// mean number in flight). Device-wide: other processes' reads count too.
type blockStat struct{ reads, sectors, ticks int64 }

func readBlockStat(dev uint64) (blockStat, bool) {
	major, minor := (dev>>8)&0xfff|(dev>>32)&^0xfff, dev&0xff|(dev>>12)&^0xff
	b, err := os.ReadFile("/sys/dev/block/" + strconv.FormatUint(major, 10) + ":" + strconv.FormatUint(minor, 10) + "/stat")
	if err != nil {
		return blockStat{}, false
	}
	f := strings.Fields(string(b))
	if len(f) < 4 {
		return blockStat{}, false
	}
	var v [4]int64
	for i := range v {
		v[i], _ = strconv.ParseInt(f[i], 10, 64)
	}
	return blockStat{reads: v[0], sectors: v[2], ticks: v[3]}, true
}

// ioShape describes the device reads between two blockStats over wall
// seconds: requests, mean request size, mean requests in flight.
func ioShape(a, b blockStat, wall float64) string {
	n, sec, ticks := b.reads-a.reads, b.sectors-a.sectors, b.ticks-a.ticks
	if n <= 0 {
		return "no device reads"
	}
	return strconv.FormatInt(n, 10) + " device read requests of " + strconv.FormatFloat(float64(sec)*512/1024/float64(n), 'f', 0, 64) +
		" KiB on average, " + strconv.FormatFloat(float64(ticks)/1e3/wall, 'f', 1, 64) + " in flight on average (device-wide)"
}
