package xpkg

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// header is the part of a document Parse decodes eagerly.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// Parse reads a package.yaml stream and returns the package it describes.
// It reads r incrementally, one document at a time, and keeps each payload
// document only as compact JSON.
//
// Parsing follows Crossplane's package parser and validator
// (docs/crossplane-behaviour.md#parsing-the-package-stream,
// docs/crossplane-behaviour.md#validation): documents are split on "---" lines;
// documents holding only
// whitespace, "---", "..." or comment lines are skipped and not counted.
// Every other document must be a YAML mapping with apiVersion and kind.
// Exactly one must be a meta.pkg.crossplane.io Provider, Configuration or
// Function (see Meta); its spec.crossplane.version must be a semver
// constraint, and each dependency must have a target (Dependency.Target) and
// a version that is a constraint or a digest. Every other document must be of
// a kind the package type may carry (crossplane.PackageKind.AllowedPayload); where Crossplane
// only warns about other kinds and drops them, Parse rejects them.
//
// Errors about a document are *DocumentError values; a package without a
// meta object gives ErrNoMeta, a second meta object ErrMultipleMeta, and
// objects of disallowed kinds ErrKindNotAllowed (one *DocumentError per
// object, joined). A stream longer than MaxPackageYAMLSize, or a document
// longer than MaxDocumentSize, is an error matching ErrTooLarge (for a
// document, a *DocumentError); Parse stops reading r there, so the memory
// it takes is bounded whatever r expands to. An error reading r is returned
// wrapped.
func Parse(r io.Reader) (*Package, error) {
	return parse(r, MaxPackageYAMLSize, MaxDocumentSize)
}

// parse is Parse with the stream and document limits as arguments.
func parse(r io.Reader, streamLimit, docLimit int64) (*Package, error) {
	r = newLimitReader(r, streamLimit, docLimit)
	docs, readErr := decodeAll(utilyaml.NewYAMLReader(bufio.NewReaderSize(r, 64<<10)), runtime.GOMAXPROCS(0))
	// A stream over a limit is refused as such, whatever its documents
	// hold: the bytes before the limit may end mid-line and read as
	// something else.
	if errors.Is(readErr, ErrTooLarge) {
		return nil, readErr
	}
	p := &Package{}
	metaIndex := -1
	for i, d := range docs {
		if d.err != nil {
			return nil, &DocumentError{Index: i, Kind: d.h.Kind, Name: d.h.Metadata.Name, Err: d.err}
		}
		h := d.h
		gv, err := schema.ParseGroupVersion(h.APIVersion)
		if err != nil {
			return nil, &DocumentError{Index: i, Kind: h.Kind, Name: h.Metadata.Name, Err: fmt.Errorf("invalid apiVersion %q: %w", h.APIVersion, err)}
		}
		if gv.Group != crossplane.MetaGroup {
			p.Objects = append(p.Objects, Object{
				Index:      i,
				APIVersion: h.APIVersion,
				Kind:       h.Kind,
				Name:       h.Metadata.Name,
				Namespace:  h.Metadata.Namespace,
				Raw:        d.raw,
			})
			continue
		}
		if err := checkMetaType(gv.Version, h.Kind); err != nil {
			return nil, &DocumentError{Index: i, Kind: h.Kind, Name: h.Metadata.Name, Err: err}
		}
		if metaIndex >= 0 {
			return nil, &DocumentError{Index: i, Kind: h.Kind, Name: h.Metadata.Name,
				Err: fmt.Errorf("%w: document %d (%s %s) is already the package meta", ErrMultipleMeta, metaIndex, p.Meta.Kind, p.Meta.Name)}
		}
		m, err := decodeMeta(d.raw)
		if err != nil {
			return nil, &DocumentError{Index: i, Kind: h.Kind, Name: h.Metadata.Name, Err: err}
		}
		p.Meta = m
		metaIndex = i
	}
	// A read error comes after every document before it, and after their
	// errors.
	if readErr != nil {
		return nil, readErr
	}
	if metaIndex < 0 {
		return nil, ErrNoMeta
	}
	if err := checkPayload(p); err != nil {
		return nil, err
	}
	return p, nil
}

// decoded is one non-empty document converted by decodeDocument.
type decoded struct {
	raw []byte
	h   header
	err error
}

// decodeAll reads the documents of yr in order and converts each to JSON
// with decodeDocument, workers at a time: reading and splitting the stream
// is sequential and cheap, the YAML to JSON conversion is where the time
// goes (2.5 s of CPU for the 98 MB provider-aws monolith). It returns the
// non-empty documents in stream order and the error that stopped the read
// (a *DocumentError for malformed YAML), after converting every document
// read before it.
func decodeAll(yr *utilyaml.YAMLReader, workers int) ([]decoded, error) {
	type job struct {
		i   int
		doc []byte
	}
	var (
		mu   sync.Mutex
		docs []decoded
		wg   sync.WaitGroup
	)
	jobs := make(chan job, 2*workers)
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				raw, h, err := decodeDocument(j.doc)
				mu.Lock()
				docs[j.i] = decoded{raw: raw, h: h, err: err}
				mu.Unlock()
			}
		}()
	}
	var readErr error
	for i := 0; ; {
		doc, err := yr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var (
				syntax utilyaml.YAMLSyntaxError
				size   *sizeError
			)
			switch {
			case errors.As(err, &size) && size.what == "document":
				readErr = &DocumentError{Index: i, Err: err}
			case errors.As(err, &size):
				readErr = err
			case errors.As(err, &syntax):
				readErr = &DocumentError{Index: i, Err: fmt.Errorf("malformed YAML: %w", err)}
			default:
				readErr = fmt.Errorf("cannot read %s: %w", StreamFile, err)
			}
			break
		}
		if isEmptyDocument(doc) {
			continue
		}
		mu.Lock()
		docs = append(docs, decoded{})
		mu.Unlock()
		jobs <- job{i: i, doc: doc}
		i++
	}
	close(jobs)
	wg.Wait()
	return docs, readErr
}

// decodeDocument converts one YAML document to compact JSON and decodes its
// header. On error the returned header holds what could be decoded.
func decodeDocument(doc []byte) ([]byte, header, error) {
	var h header
	raw, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, h, fmt.Errorf("malformed YAML: %w", err)
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return nil, h, errors.New("document is not a YAML mapping (an object with apiVersion and kind)")
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &h); err != nil {
		// A type error still fills in what it could; report it with the rest.
		return nil, h, fmt.Errorf("invalid object header (apiVersion, kind, metadata.name, metadata.namespace): %w", err)
	}
	switch {
	case h.APIVersion == "" && h.Kind == "":
		return nil, h, errors.New("document has no apiVersion and no kind")
	case h.APIVersion == "":
		return nil, h, errors.New("document has no apiVersion")
	case h.Kind == "":
		return nil, h, errors.New("document has no kind")
	}
	return raw, h, nil
}

// isEmptyDocument reports whether doc holds only blank lines, document
// markers ("---", "...") and comments, the documents Crossplane's parser
// skips.
func isEmptyDocument(doc []byte) bool {
	for len(doc) > 0 {
		line := doc
		if i := bytes.IndexByte(doc, '\n'); i >= 0 {
			line, doc = doc[:i], doc[i+1:]
		} else {
			doc = nil
		}
		t := bytes.TrimSpace(line)
		if len(t) == 0 || t[0] == '#' || string(t) == "---" || string(t) == "..." {
			continue
		}
		return false
	}
	return true
}

// checkPayload returns a joined error with one *DocumentError per object the
// package type may not carry.
func checkPayload(p *Package) error {
	kind := p.Meta.Kind.Descriptor()
	var errs []error
	for _, o := range p.Objects {
		if gk := o.GroupKind(); !kind.AllowsPayload(gk) {
			errs = append(errs, &DocumentError{Index: o.Index, Kind: o.Kind, Name: o.Name,
				Err: &kindNotAllowedError{pkg: p.Meta.Kind, got: gk, allowed: kind.AllowedPayload}})
		}
	}
	return errors.Join(errs...)
}
