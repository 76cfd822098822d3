// Command nereus is the Nereus server and its command-line client.
//
//	nereus serve                       run the server on embedded defaults
//	nereus stream create|list|describe|append|read|tail|trim|seal|delete
//
// The stream commands talk to a running server's admin REST API
// (--server, env NEREUS_SERVER, default http://127.0.0.1:8080). Errors are
// one line on stderr and a non-zero exit status.
//
// This package is wiring only: argument parsing, terminal output and
// signals. It must never implement stream semantics itself; the server
// package and the adminapi client do the work.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// env is the process environment a command runs in; tests substitute it.
type env struct {
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
	lookupEnv func(string) (string, bool)
	// signalContext returns a context cancelled on SIGINT/SIGTERM and a
	// function that restores default signal handling (so a second Ctrl-C
	// kills a stuck drain).
	signalContext func(context.Context) (context.Context, context.CancelFunc)
	// isTerminal reports whether the writer is an interactive terminal.
	isTerminal func(io.Writer) bool
}

func osEnv() env {
	return env{
		stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, lookupEnv: os.LookupEnv,
		signalContext: func(ctx context.Context) (context.Context, context.CancelFunc) {
			return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		},
		isTerminal: isTerminal,
	}
}

func main() {
	os.Exit(run(context.Background(), osEnv(), os.Args[1:]))
}
