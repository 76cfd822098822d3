package server

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// nodeIDFile is created in the data dir on first start. The node ID is this
// broker's stable identity: it is the WriterID of the append sessions the
// process takes, so a restarted process on the same data dir is recognised
// as the same writer instead of waiting for its previous sessions to expire.
const nodeIDFile = "node-id"

// loadNodeID returns the node ID stored in dataDir, creating it (crash-safe:
// temp file, fsync, rename, fsync dir) if absent.
func loadNodeID(dataDir string) (string, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", fmt.Errorf("data dir: %w", err)
	}
	path := filepath.Join(dataDir, nodeIDFile)
	if b, err := os.ReadFile(path); err == nil {
		id := strings.TrimSpace(string(b))
		if id == "" {
			return "", fmt.Errorf("%s is empty; remove it to generate a new node ID", path)
		}
		return id, nil
	} else if !os.IsNotExist(err) {
		return "", err
	}
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	id := "nereus-" + hex.EncodeToString(raw[:])
	tmp, err := os.CreateTemp(dataDir, ".node-id-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(id + "\n"); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	if d, err := os.Open(dataDir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return id, nil
}
