package kafka

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestReadmeVersionTable keeps the README's API table equal to the registry.
func TestReadmeVersionTable(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for key, r := range SupportedVersions() {
		row := fmt.Sprintf("| %d | %s | %d-%d", key, kmsg.NameForKey(key), r[0], r[1])
		row = strings.Replace(row, "InitProducerID", "InitProducerId", 1)
		if !strings.Contains(readme, row) {
			t.Errorf("README.md lacks the row %q", row)
		}
	}
	if n := strings.Count(readme[strings.Index(readme, "## Supported APIs"):strings.Index(readme, "Each `NN_name.go`")], "\n| "); n != len(SupportedVersions())+2 { // header and separator rows
		t.Errorf("README.md API table has %d rows, registry %d keys", n-2, len(SupportedVersions()))
	}
}
