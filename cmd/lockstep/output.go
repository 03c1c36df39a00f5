package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// documentAPIVersion is the apiVersion of every document lockstep prints
// for machines (-o json|yaml, diff --format json).
const documentAPIVersion = "lockstep.io/v1alpha1"

// outputFormat is -o/--output of the commands that print a document for
// machines: "" (the text for people), json or yaml. Any other value is
// refused when the flag is parsed.
type outputFormat string

func (o *outputFormat) String() string { return string(*o) }

func (o *outputFormat) Set(s string) error {
	switch s {
	case "", "json", "yaml":
		*o = outputFormat(s)
		return nil
	}
	return fmt.Errorf("%q: want json or yaml", s)
}

func (o *outputFormat) Type() string { return "json|yaml" }

// bindOutput registers -o/--output; kind names the document printed.
func bindOutput(fl *pflag.FlagSet, o *outputFormat, kind string) {
	fl.VarP(o, "output", "o", "output format: json or yaml, a "+documentAPIVersion+" "+kind+" document (default: text)")
}

// printDocument writes doc (a struct whose first fields are APIVersion and
// Kind) as indented JSON, or as YAML, followed by a newline.
func printDocument(w io.Writer, doc any, format outputFormat) error {
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
