// Command lockstep is a GitOps package manager for Crossplane: it resolves
// package declarations into a lockfile of OCI digests, renders what Crossplane's
// package manager would install, applies it with server-side apply, and keeps a
// cluster equal to a Git repository. This command only parses flags and wires
// the library packages under sources, lockfile, render, apply and health.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, err := newRootCommand().ExecuteContextC(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockstep:", err)
		code := exitCode(err)
		if code == exitUsage {
			fmt.Fprintln(os.Stderr, usageHint(cmd))
		}
		os.Exit(code)
	}
}
