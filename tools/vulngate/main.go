// Command vulngate reads `govulncheck -format json` from stdin, prints the
// vulnerabilities the code actually calls, and decides whether CI fails.
//
// Policy: a called vulnerability in a required module fails (fix it with
// `go get module@fixed`). A called vulnerability in the standard library
// fails only with -strict: its fix is a newer Go toolchain, which the
// project's machines may not be able to install (GOTOOLCHAIN=local, and the
// module proxy may not serve the fixed release yet); without -strict it is
// printed as a warning naming the Go version that fixes it. Vulnerabilities
// in imported or required code that is never called are counted, not listed.
//
// Exemptions (-exempt FILE, lines "GO-ID reason"): a called vulnerability in
// a module for which NO fixed version exists can be accepted with a written
// reason; it is printed as EXEMPT with that reason. As soon as a fix is
// published the exemption stops applying and the finding fails again.
//
// It must never hide a finding: everything it does not fail on it prints.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

type frame struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Package  string `json:"package"`
	Function string `json:"function"`
	Receiver string `json:"receiver"`
	Position *struct {
		Filename string `json:"filename"`
		Line     int    `json:"line"`
		Column   int    `json:"column"`
	} `json:"position"`
}

type message struct {
	Config *struct {
		GoVersion      string `json:"go_version"`
		DB             string `json:"db"`
		ScannerVersion string `json:"scanner_version"`
	} `json:"config"`
	OSV *struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	} `json:"osv"`
	Finding *struct {
		OSV          string   `json:"osv"`
		FixedVersion string   `json:"fixed_version"`
		Trace        []*frame `json:"trace"`
	} `json:"finding"`
}

type called struct {
	id, module, version, fixed string
	// site is the caller-side frame closest to our code.
	sites []string
}

func main() {
	strict := flag.Bool("strict", false, "fail on called standard-library vulnerabilities too")
	exemptFile := flag.String("exempt", "", "file of accepted unfixable vulnerabilities: lines \"GO-ID reason\"")
	flag.Parse()
	exempt := map[string]string{}
	if *exemptFile != "" {
		b, err := os.ReadFile(*exemptFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "vulngate:", err)
			os.Exit(2)
		}
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			id, reason, _ := strings.Cut(line, " ")
			exempt[id] = strings.TrimSpace(reason)
		}
	}
	summaries := map[string]string{}
	calledByID := map[string]*called{}
	imported := map[string]bool{}
	var goVersion, db string
	dec := json.NewDecoder(bufio.NewReader(os.Stdin))
	for {
		var m message
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			fmt.Fprintln(os.Stderr, "vulngate: bad govulncheck JSON:", err)
			os.Exit(2)
		}
		switch {
		case m.Config != nil:
			goVersion, db = m.Config.GoVersion, m.Config.DB
		case m.OSV != nil:
			summaries[m.OSV.ID] = m.OSV.Summary
		case m.Finding != nil && len(m.Finding.Trace) > 0:
			f := m.Finding
			vuln := f.Trace[0]
			if vuln.Function == "" {
				imported[f.OSV] = true
				continue
			}
			c := calledByID[f.OSV]
			if c == nil {
				c = &called{id: f.OSV, module: vuln.Module, version: vuln.Version, fixed: f.FixedVersion}
				calledByID[f.OSV] = c
			}
			last := f.Trace[len(f.Trace)-1]
			site := last.Package + "." + last.Function
			if last.Position != nil {
				site = fmt.Sprintf("%s:%d (%s)", last.Position.Filename, last.Position.Line, site)
			}
			if len(c.sites) < 3 {
				c.sites = append(c.sites, site)
			}
		}
	}
	ids := make([]string, 0, len(calledByID))
	for id := range calledByID {
		ids = append(ids, id)
		delete(imported, id)
	}
	sort.Strings(ids)
	fmt.Printf("govulncheck (%s, db %s): %d called vulnerabilities, %d more in imported/required code that is not called\n",
		goVersion, db, len(ids), len(imported))
	failed := 0
	for _, id := range ids {
		c := calledByID[id]
		stdlib := c.module == "stdlib" || c.module == "toolchain"
		verdict := "FAIL"
		reason, exempted := exempt[id]
		switch {
		case stdlib && !*strict:
			verdict = "WARN"
		case exempted && c.fixed == "":
			verdict = "EXEMPT"
		default:
			failed++
		}
		fix := c.fixed
		if fix == "" {
			fix = "no fix yet"
		}
		fmt.Printf("  %s %s: %s\n      in %s@%s, fixed in %s; called from %s\n", verdict, id, summaries[id],
			c.module, c.version, fix, strings.Join(c.sites, ", "))
		if stdlib && !*strict {
			fmt.Printf("      (standard library: fixed by upgrading the Go toolchain to %s)\n", strings.TrimPrefix(fix, "v"))
		}
		if verdict == "EXEMPT" {
			fmt.Printf("      (accepted, no fix exists: %s)\n", reason)
		}
	}
	if failed > 0 {
		fmt.Printf("vulngate: %d called vulnerabilities must be fixed\n", failed)
		os.Exit(1)
	}
}
