package render

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// WriteYAML writes o as one YAML stream: a header comment, then package by
// package (in Output order) a comment block describing the package and its
// revision and every object in PackageOutput.Objects order. Each object is
// a document ("---") whose leading comments state its ownership intent and
// what apply fills in; map keys are sorted. The bytes depend only on o, so
// the same inputs always give the same stream. Objects are converted one at
// a time, so the stream of a large provider never sits in memory as a whole.
func (o *Output) WriteYAML(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	fmt.Fprintf(bw, "# lockstep render: %d package(s), instance %s, namespace %s.\n", len(o.Packages), o.Instance, o.Namespace)
	for _, p := range o.Packages {
		if err := p.writeYAML(bw); err != nil {
			return err
		}
	}
	if err := o.writeManifestsYAML(bw); err != nil {
		return err
	}
	return bw.Flush()
}

// WriteYAML writes the package's objects as a YAML stream in the format of
// Output.WriteYAML, without the stream header.
func (p *PackageOutput) WriteYAML(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	if err := p.writeYAML(bw); err != nil {
		return err
	}
	return bw.Flush()
}

// FileName is the file WriteDir writes the package to:
// <lower-case kind>.<name>.yaml, for example provider.provider-nop.yaml.
func (p *PackageOutput) FileName() string {
	return p.Kind.Lower() + "." + p.Name + ".yaml"
}

// ManifestsFileName is the file WriteDir writes the manifests to.
const ManifestsFileName = "manifests.yaml"

// WriteDir writes each package to its own file in dir (PackageOutput.FileName),
// and the manifests, when there are any, to ManifestsFileName, creating dir
// when needed. Each file is written to a temporary file in dir
// and renamed into place. Other files in dir are left alone.
func (o *Output) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create output directory: %w", err)
	}
	for _, p := range o.Packages {
		path := filepath.Join(dir, p.FileName())
		if err := writeFileAtomic(path, func(w io.Writer) error { return p.WriteYAML(w) }); err != nil {
			return fmt.Errorf("%s %s: %w", p.Kind, p.Name, err)
		}
	}
	if len(o.Manifests) > 0 {
		err := writeFileAtomic(filepath.Join(dir, ManifestsFileName), func(w io.Writer) error {
			bw := bufio.NewWriter(w)
			if err := o.writeManifestsYAML(bw); err != nil {
				return err
			}
			return bw.Flush()
		})
		if err != nil {
			return fmt.Errorf("manifests: %w", err)
		}
	}
	return nil
}

func writeFileAtomic(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	defer func() { _ = os.Remove(f.Name()) }()
	if err := write(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		_ = f.Close()
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}

func (p *PackageOutput) writeYAML(w *bufio.Writer) error {
	r := p.Revision
	fmt.Fprintf(w, "#\n# %s %s\n", p.Kind, p.Name)
	fmt.Fprintf(w, "#   package:  %s@%s\n", p.Source, p.Digest)
	if p.Version != "" {
		fmt.Fprintf(w, "#   tag:      %s\n", p.Version)
	}
	fmt.Fprintf(w, "#   revision: %s (activation %s)\n", r.Name, r.ActivationPolicy)
	if r.Image != "" {
		fmt.Fprintf(w, "#   image:    %s\n", r.Image)
	}
	if r.Endpoint != "" {
		fmt.Fprintf(w, "#   endpoint: %s\n", r.Endpoint)
	}
	if len(r.Capabilities) > 0 {
		fmt.Fprintf(w, "#   capabilities: %s\n", strings.Join(r.Capabilities, ", "))
	}
	if r.Problem != nil {
		fmt.Fprintf(w, "#   problem:  %s\n", oneLine(r.Problem.Error()))
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "#   warning:  %s\n", oneLine(warn))
	}
	if len(r.MRDs) > 0 {
		fmt.Fprintf(w, "#   MRDs:     %d (%d active, %d inactive)\n", len(r.MRDs), len(r.ManagedCRDs), len(r.MRDs)-len(r.ManagedCRDs))
	}
	if r.AwaitingActivation {
		w.WriteString("#   awaiting activation: safe-start and no MRD is active; the Deployment has 0 replicas\n")
	}
	for _, o := range p.Objects() {
		if err := o.writeYAML(w, p.namespace); err != nil {
			return err
		}
	}
	for _, o := range r.ManagedCRDs {
		if err := o.writeYAMLNote(w, p.namespace, "the CRD of an active MRD, as Crossplane's MRD controller makes it; lockstep applies it with the MRD"); err != nil {
			return err
		}
	}
	return nil
}

// writeYAML writes one document: comments with the intents, then the object.
func (o *Object) writeYAML(w *bufio.Writer, ns string) error {
	return o.writeYAMLNote(w, ns, "")
}

// writeYAMLNote is writeYAML with a first comment line, none when note is
// "".
func (o *Object) writeYAMLNote(w *bufio.Writer, ns, note string) error {
	w.WriteString("---\n")
	if note != "" {
		fmt.Fprintf(w, "# %s\n", note)
	}
	if o.Controller != nil {
		fmt.Fprintf(w, "# controller: %s\n", o.Controller)
	}
	if len(o.Owners) > 0 {
		owners := make([]string, 0, len(o.Owners))
		for _, r := range o.Owners {
			owners = append(owners, r.String())
		}
		fmt.Fprintf(w, "# owners: %s\n", strings.Join(owners, ", "))
	}
	if o.RevisionRecord {
		w.WriteString("# spec.revision: set by apply (the next number among the package's revisions)\n")
		if !bytes.Contains(o.JSON(), []byte(`"desiredState"`)) {
			w.WriteString("# spec.desiredState: set by apply when it creates the revision (Manual activation)\n")
		}
	}
	if o.CABundle != nil {
		fmt.Fprintf(w, "# caBundle: set by apply from Secret %s/%s key %s\n", ns, o.CABundle.SecretName, o.CABundle.Key)
	}
	if o.TLS != nil {
		fmt.Fprintf(w, "# tls: %s certificate for %s signed by Secret %s/%s; filled by apply when empty\n",
			o.TLS.Usage, strings.Join(o.TLS.DNSNames, ", "), ns, o.TLS.CASecretName)
	}
	if o.RevisionUID {
		fmt.Fprintf(w, "# env %s: set by apply to the controller's UID\n", RevisionUIDEnv)
	}
	y, err := yaml.JSONToYAML(o.JSON())
	if err != nil {
		return fmt.Errorf("%s: cannot convert to YAML: %w", o, err)
	}
	_, err = w.Write(y)
	return err
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
