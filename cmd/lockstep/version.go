package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// buildInfo is what `lockstep version` prints: where the binary comes from.
type buildInfo struct {
	// Version is the release version: -X main.version at build time (make
	// build and the image set it from git describe), else the module
	// version Go recorded (a `go install ...@vX.Y.Z`), else "dev".
	Version string `json:"version"`
	// Revision and Time are the VCS revision and commit time Go recorded
	// when it built from a checkout (-buildvcs), and Modified whether the
	// checkout had uncommitted changes.
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"goVersion"`
	// Module is the main module's path.
	Module string `json:"module,omitempty"`
}

// readBuildInfo fills a buildInfo from runtime/debug.ReadBuildInfo and the
// version set at build time.
func readBuildInfo() buildInfo {
	out := buildInfo{Version: version}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return out
	}
	out.GoVersion, out.Module = bi.GoVersion, bi.Main.Path
	if out.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		out.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			out.Revision = s.Value
		case "vcs.time":
			out.Time = s.Value
		case "vcs.modified":
			out.Modified = s.Value == "true"
		}
	}
	return out
}

// String is the one line --version prints.
func (b buildInfo) String() string {
	s := b.Version
	if b.Revision != "" {
		rev := b.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += " (" + rev
		if b.Modified {
			s += ", modified"
		}
		if b.Time != "" {
			s += ", " + b.Time
		}
		s += ")"
	}
	return s + " " + b.GoVersion
}

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print lockstep's version, VCS revision and Go version",
		Long: `version prints the release version of this lockstep binary (set by make build
and the image from git describe, or the module version of go install), the VCS
revision and commit time Go recorded when it built it, and the Go version.
lockstep --version prints the same on one line.`,
		Example: `  lockstep version
  lockstep version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printBuildInfo(cmd.OutOrStdout(), readBuildInfo(), output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: one line per field)")
	return cmd
}

// printBuildInfo writes b as text, json or yaml; another format is a usage
// error.
func printBuildInfo(w io.Writer, b buildInfo, format string) error {
	switch format {
	case "":
		fmt.Fprintf(w, "version:   %s\n", b.Version)
		if b.Revision != "" {
			fmt.Fprintf(w, "revision:  %s\n", b.Revision)
			fmt.Fprintf(w, "time:      %s\n", b.Time)
			fmt.Fprintf(w, "modified:  %t\n", b.Modified)
		}
		fmt.Fprintf(w, "go:        %s\n", b.GoVersion)
		return nil
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(b)
	case "yaml":
		out, err := yaml.Marshal(b)
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	default:
		return usageError(fmt.Errorf("--output %q: want json or yaml", format))
	}
}
