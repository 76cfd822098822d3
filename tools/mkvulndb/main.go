// Command mkvulndb builds an offline Go vulnerability database for
// govulncheck from the OSV files shipped in the golang.org/x/vulndb module
// (its data/osv directory), so CI can run govulncheck on machines that cannot
// reach vuln.go.dev but can reach the Go module proxy.
//
// It writes the v1 database layout that govulncheck's file:// client reads
// (golang.org/x/vuln internal/client: it detects a v1 database by the
// presence of index/modules.json and then reads only these endpoints):
//
//	index/db.json       {"modified": <latest entry modification time>}
//	index/modules.json  [{"path": M, "vulns": [{"id", "modified", "fixed"}]}], sorted by path, vulns by id
//	index/vulns.json    [{"id", "modified", "aliases"}], sorted by id (part of the v1 spec; unused by govulncheck)
//	ID/<ID>.json        the OSV entry, byte for byte
//
// "fixed" is the latest fixing version of the entry's SEMVER ranges for that
// module, or empty when the vulnerability was re-introduced after it; the
// client only uses it to skip fetching entries that are fixed at or below the
// version in use, so it must never be later than the true fix.
//
// It must never write a partial database: the output is built in a temporary
// directory beside -out and renamed into place.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/semver"
)

type osvEntry struct {
	ID        string    `json:"id"`
	Modified  time.Time `json:"modified"`
	Aliases   []string  `json:"aliases,omitempty"`
	Published time.Time `json:"published"`
	Affected  []struct {
		// The OSV "package" of a Go entry names the module path.
		Package struct {
			Name string `json:"name"`
		} `json:"package"`
		Ranges []struct {
			Type   string `json:"type"`
			Events []struct {
				Introduced string `json:"introduced,omitempty"`
				Fixed      string `json:"fixed,omitempty"`
			} `json:"events"`
		} `json:"ranges,omitempty"`
	} `json:"affected"`
}

type moduleVuln struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Fixed    string    `json:"fixed,omitempty"`
}

type moduleMeta struct {
	Path  string       `json:"path"`
	Vulns []moduleVuln `json:"vulns"`
}

type vulnMeta struct {
	ID       string    `json:"id"`
	Modified time.Time `json:"modified"`
	Aliases  []string  `json:"aliases,omitempty"`
}

// less compares OSV versions, which carry no "v" prefix. An empty or invalid
// version sorts before every valid one.
func less(a, b string) bool {
	return semver.Compare("v"+a, "v"+b) < 0
}

// latestFix returns the latest fixed version in the SEMVER ranges, or "" if
// some range re-introduces the vulnerability after that fix.
func latestFix(e *osvEntry, affectedIdx int) string {
	latest := ""
	for _, r := range e.Affected[affectedIdx].Ranges {
		if r.Type != "SEMVER" {
			continue
		}
		for _, ev := range r.Events {
			if ev.Fixed != "" && (latest == "" || less(latest, ev.Fixed)) {
				latest = ev.Fixed
			}
		}
		for _, ev := range r.Events {
			if ev.Introduced != "" && ev.Introduced != "0" && (latest == "" || less(latest, ev.Introduced)) {
				latest = ""
				break
			}
		}
	}
	return latest
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func build(src, out string, modified time.Time) (int, error) {
	files, err := filepath.Glob(filepath.Join(src, "*.json"))
	if err != nil {
		return 0, err
	}
	if len(files) == 0 {
		return 0, fmt.Errorf("no OSV files in %s", src)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return 0, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), ".vulndb-tmp-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(tmp)
	for _, d := range []string{"index", "ID"} {
		if err := os.Mkdir(filepath.Join(tmp, d), 0o755); err != nil {
			return 0, err
		}
	}

	var dbModified time.Time
	modules := map[string]*moduleMeta{}
	var vulns []vulnMeta
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		var e osvEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return 0, fmt.Errorf("%s: %w", f, err)
		}
		if e.ID == "" || filepath.Base(f) != e.ID+".json" {
			return 0, fmt.Errorf("%s: file name does not match entry id %q", f, e.ID)
		}
		// Entries in the vulndb repository carry a zero "modified" (the
		// hosted database stamps it from git history); fall back to the
		// publication time so the index stays meaningful.
		if e.Modified.IsZero() {
			e.Modified = e.Published
		}
		if e.Modified.After(dbModified) {
			dbModified = e.Modified
		}
		vulns = append(vulns, vulnMeta{ID: e.ID, Modified: e.Modified, Aliases: e.Aliases})
		for i, a := range e.Affected {
			m := modules[a.Package.Name]
			if m == nil {
				m = &moduleMeta{Path: a.Package.Name, Vulns: []moduleVuln{}}
				modules[a.Package.Name] = m
			}
			m.Vulns = append(m.Vulns, moduleVuln{ID: e.ID, Modified: e.Modified, Fixed: latestFix(&e, i)})
		}
		if err := os.WriteFile(filepath.Join(tmp, "ID", e.ID+".json"), raw, 0o644); err != nil {
			return 0, err
		}
	}

	mods := make([]*moduleMeta, 0, len(modules))
	for _, m := range modules {
		sort.SliceStable(m.Vulns, func(i, j int) bool { return m.Vulns[i].ID < m.Vulns[j].ID })
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Path < mods[j].Path })
	sort.Slice(vulns, func(i, j int) bool { return vulns[i].ID < vulns[j].ID })

	if err := writeJSON(filepath.Join(tmp, "index", "modules.json"), mods); err != nil {
		return 0, err
	}
	if err := writeJSON(filepath.Join(tmp, "index", "vulns.json"), vulns); err != nil {
		return 0, err
	}
	// db.json last: it is the "complete" marker a reader of a half-built
	// directory would miss.
	if modified.After(dbModified) {
		dbModified = modified
	}
	if err := writeJSON(filepath.Join(tmp, "index", "db.json"), map[string]time.Time{"modified": dbModified}); err != nil {
		return 0, err
	}
	if err := os.RemoveAll(out); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	if err := os.Rename(tmp, out); err != nil {
		return 0, err
	}
	return len(files), nil
}

func main() {
	src := flag.String("src", "", "directory of OSV entries (<vulndb module>/data/osv)")
	out := flag.String("out", "", "output directory for the v1 database")
	modifiedFlag := flag.String("modified", "", "database modification time (RFC 3339), e.g. the vulndb commit time; default: the latest entry's")
	flag.Parse()
	var modified time.Time
	if *modifiedFlag != "" {
		t, err := time.Parse(time.RFC3339, *modifiedFlag)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mkvulndb: -modified:", err)
			os.Exit(2)
		}
		modified = t
	}
	if *src == "" || *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: mkvulndb -src DIR -out DIR")
		os.Exit(2)
	}
	n, err := build(*src, *out, modified)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkvulndb:", strings.TrimSpace(err.Error()))
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "mkvulndb: wrote %d entries to %s\n", n, *out)
}
