package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/sigstore/sigstore-go/pkg/root"

	"github.com/lockstep-gitops/lockstep/internal/redact"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/sources/cosign"
)

// Fetched is a package read by its digest.
type Fetched struct {
	// Digest is the digest asked for: of the package's manifest, or of its
	// platform index.
	Digest v1.Hash
	// LayerDigest is the digest of the layer package.yaml came from, the
	// first layer annotated io.crossplane.xpkg: base
	// (docs/crossplane-behaviour.md#package-image). It is the
	// zero Hash when the package has no such layer and package.yaml was read
	// from the flattened filesystem of all layers.
	LayerDigest v1.Hash
	// LayersDigest covers a package without a base layer: the sha256 of
	// its layer digests, in the manifest's order, each followed by a
	// newline (LayersDigestOf). Two flattened images with the same CRD
	// names and counts but other bits have different LayersDigests, so a
	// digest swapped by hand between them is seen offline. It is the zero
	// Hash when LayerDigest is set.
	LayersDigest v1.Hash
	// Package is the parsed package.yaml. It is shared by every caller that
	// asks for the same digest and must not be modified.
	Package *xpkg.Package
}

// Client talks to registries for one lockstep run. It resolves tags to
// digests, lists tags and pulls packages by digest into a Cache, following
// Crossplane's package manager (docs/crossplane-behaviour.md#digest-resolution): every
// request goes where the ImageConfigs' rewriteImage sends it
// (docs/crossplane-behaviour.md#imageconfig-rewrite), while
// callers keep using, and recording, the original reference. Credentials
// for the registry actually contacted come from Options.PullSecrets, when
// set (the package's packagePullSecrets and the ImageConfig's pull secret,
// docs/crossplane-behaviour.md#imageconfig-pull-secrets), then from
// Options' keychain (the Docker config).
//
// A Client never sends the same request twice: Digest and Tags results are
// kept per reference and Package results per digest for the Client's life,
// errors included (except a canceled context), and concurrent callers of the
// same key wait for the one request in flight. At most Options.Jobs
// operations run at once, and transient failures are retried (Options.Retry).
//
// A Client is safe for concurrent use. Use one per run: it never forgets.
type Client struct {
	opts     Options
	cache    *Cache
	ics      []pkgv1beta1.ImageConfig
	keychain authn.Keychain
	// trust is Options.TrustedRoot, read; nil when not given.
	trust *root.TrustedRoot
	base  http.RoundTripper
	slots chan struct{}
	stats *counters

	// challenges holds each registry's answer to the auth ping; pullers
	// the go-containerregistry Pullers, per registry and credentials (and
	// per repository with token auth). See puller.
	challenges memo[*transport.Challenge]
	pullers    memo[*remote.Puller]
	digests    memo[v1.Hash]
	tags       memo[[]string]
	packages   memo[*Fetched]
	keychains  memo[clusterKeychain]

	mu sync.Mutex
	// pulls are the declared packages' pull settings by repository
	// (SetPackagePulls).
	pulls map[string]PackagePull
	// fetched holds every package read in this run, by digest.
	fetched map[v1.Hash]*Fetched
	// manifests holds verified manifest bytes that Digest's GET fallback
	// returned, so a later pull of that digest does not fetch them again.
	manifests map[v1.Hash][]byte
	// verified holds the blobs this Client wrote and checked.
	verified map[v1.Hash]bool
}

// NewClient returns a Client that reaches registries as opts says, keeps
// packages in cache, and applies the rewriteImage of ics to every request.
// cache must not be nil. It fails when opts' registry config cannot be read
// or an ImageConfig has a rewriteImage with an empty prefix (Crossplane's
// "rewrite prefix is missing", docs/crossplane-behaviour.md#imageconfig-rewrite).
func NewClient(opts Options, cache *Cache, imageConfigs []pkgv1beta1.ImageConfig) (*Client, error) {
	if cache == nil {
		return nil, errors.New("registry client: a package cache is required")
	}
	for _, ic := range imageConfigs {
		if ic.Spec.RewriteImage != nil && ic.Spec.RewriteImage.Prefix == "" {
			return nil, fmt.Errorf("ImageConfig %s: spec.rewriteImage.prefix: rewrite prefix is missing", ic.Name)
		}
	}
	opts, err := opts.withCA()
	if err != nil {
		return nil, err
	}
	keychain, err := opts.Keychain()
	if err != nil {
		return nil, err
	}
	var trust *root.TrustedRoot
	if opts.TrustedRoot != "" {
		if trust, err = cosign.LoadTrustedRoot(opts.TrustedRoot); err != nil {
			return nil, err
		}
	}
	stats := &counters{}
	next := opts.baseTransport(opts.timeout())
	withCounts := opts
	withCounts.Transport = counting{next: next, c: stats}
	return &Client{
		opts:      opts,
		cache:     cache,
		ics:       slices.Clone(imageConfigs),
		keychain:  keychain,
		trust:     trust,
		base:      withCounts.roundTripper(),
		slots:     make(chan struct{}, opts.jobs()),
		stats:     stats,
		fetched:   map[v1.Hash]*Fetched{},
		manifests: map[v1.Hash][]byte{},
		verified:  map[v1.Hash]bool{},
	}, nil
}

// Stats returns the registry traffic of this Client so far: requests by
// kind ("HEAD", "tags", "manifest", "blob", and other) and bytes read.
func (c *Client) Stats() Stats { return c.stats.snapshot() }

// ImageConfig returns what the Client's ImageConfigs say about ref (a
// reference or repository as written): where it is pulled from and which
// ImageConfig's rewrite and pull secret apply (MatchImageConfigs).
func (c *Client) ImageConfig(ref string) ImageConfigMatch { return MatchImageConfigs(ref, c.ics) }

// Digest resolves the tag ref to the digest of what it points at, the way
// Crossplane does (docs/crossplane-behaviour.md#digest-resolution step 4): one
// HEAD request for the manifest,
// and, when the registry refuses HEAD or answers without a usable digest
// (any failure but a canceled context, the plain-HTTP guard or a
// TimeoutError: a registry that did not answer HEAD will not answer GET),
// one GET. For a platform index it
// returns the digest of the index, which is what Crossplane pins. The
// request goes to the rewritten reference (ImageConfig); the digest is the
// same at both places.
//
// Results are kept per reference for the Client's life. The error names ref
// (and where it was pulled from); for a GET after a failed HEAD it carries
// both failures.
func (c *Client) Digest(ctx context.Context, ref name.Tag) (v1.Hash, error) {
	return c.digests.do(ctx, ref.Name(), func(ctx context.Context) (v1.Hash, error) {
		src, err := c.source(ref.String())
		if err != nil {
			return v1.Hash{}, err
		}
		release, err := c.acquire(ctx)
		if err != nil {
			return v1.Hash{}, err
		}
		defer release()

		puller, tried, err := c.puller(ctx, ref.String(), src.ref.Context())
		if err != nil {
			return v1.Hash{}, fmt.Errorf("cannot resolve the digest of %s: %w", src, err)
		}
		desc, headErr := puller.Head(ctx, src.ref)
		if headErr == nil {
			return desc.Digest, nil
		}
		var timeout *TimeoutError
		if canceled(headErr) || errors.Is(headErr, ErrPlainHTTP) || errors.As(headErr, &timeout) {
			return v1.Hash{}, fmt.Errorf("cannot resolve the digest of %s%s: %w", src, triedSecrets(c.opts.PullSecrets, tried, headErr), redact.Error(headErr))
		}
		got, err := puller.Get(ctx, src.ref)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("cannot resolve the digest of %s%s: HEAD failed (%v), and GET: %w", src, triedSecrets(c.opts.PullSecrets, tried, err), redact.Error(headErr), redact.Error(err)) //nolint:errorlint // the GET failed last; HEAD's error is context, not the cause
		}
		// go-containerregistry hashed the body it read, so the bytes match
		// the digest; keep them for a pull of that digest.
		c.mu.Lock()
		c.manifests[got.Digest] = got.Manifest
		c.mu.Unlock()
		return got.Digest, nil
	})
}

// Tags lists the tags of repo as the registry returns them, following its
// pagination (one request per page). The request goes to the rewritten
// repository (ImageConfig). Results are kept per repository for the
// Client's life; each call returns its own copy. The error names repo.
func (c *Client) Tags(ctx context.Context, repo name.Repository) ([]string, error) {
	tags, err := c.tags.do(ctx, repo.Name(), func(ctx context.Context) ([]string, error) {
		m := MatchImageConfigs(repo.String(), c.ics)
		target, err := c.opts.ParseRepository(m.Rewritten)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", describe(m), err)
		}
		release, err := c.acquire(ctx)
		if err != nil {
			return nil, err
		}
		defer release()
		puller, tried, err := c.puller(ctx, repo.String(), target)
		if err != nil {
			return nil, fmt.Errorf("cannot list the tags of %s: %w", describe(m), err)
		}
		tags, err := puller.List(ctx, target)
		if err != nil {
			return nil, fmt.Errorf("cannot list the tags of %s%s: %w", describe(m), triedSecrets(c.opts.PullSecrets, tried, err), redact.Error(err))
		}
		return tags, nil
	})
	return slices.Clone(tags), err
}

// Package returns the package at ref's digest (a tag in ref, if any, is
// ignored). From the cache when it holds the package (no request at all);
// otherwise it pulls the manifest by digest (for a platform index, the index
// and then its linux/amd64 manifest,
// docs/crossplane-behaviour.md#package-image) and the layers package.yaml
// is read from (the io.crossplane.xpkg: base layer, or every layer when none
// is annotated), from the rewritten reference (ImageConfig), verifies each
// against its digest, writes them to the cache, and parses package.yaml
// with xpkg from the cache. Layers stream to disk; nothing is held in memory
// but the manifests and the parsed package.
//
// A corrupt cache entry (a blob that does not match its digest) is removed
// and pulled again. Content from the registry that does not match its digest
// is an error wrapping ErrDigestMismatch (or go-containerregistry's own
// verification error) and leaves nothing in the cache.
//
// Results are kept per digest for the Client's life, and concurrent calls
// for the same digest pull once. Errors name ref.
func (c *Client) Package(ctx context.Context, ref name.Digest) (*Fetched, error) {
	d, err := v1.NewHash(ref.DigestStr())
	if err != nil {
		return nil, fmt.Errorf("package %s: %w", ref, err)
	}
	if f := c.lookup(d); f != nil {
		return f, nil
	}
	return c.packages.do(ctx, ref.Context().Name()+"@"+d.String(), func(ctx context.Context) (*Fetched, error) {
		if f := c.lookup(d); f != nil {
			return f, nil
		}
		f, err := c.cache.load(d, c.isVerified)
		if err != nil && (errors.Is(err, ErrNotCached) || errors.Is(err, ErrCorrupt)) {
			if p := c.packagePull(ref.Context()); p.Never {
				return nil, &NotCachedError{Package: p.Package, Ref: ref.Context().Name() + "@" + d.String(), CacheDir: c.cache.Dir()}
			}
			var src source
			if src, err = c.source(ref.Context().String() + "@" + d.String()); err != nil {
				return nil, err
			}
			if tried, err := c.pull(ctx, ref.Context().String(), src, d); err != nil {
				return nil, fmt.Errorf("cannot pull package %s%s: %w", src, triedSecrets(c.opts.PullSecrets, tried, err), err)
			}
			f, err = c.cache.load(d, c.isVerified)
		}
		if err != nil {
			return nil, fmt.Errorf("package %s: %w", ref, err)
		}
		c.mu.Lock()
		c.fetched[d] = f
		c.mu.Unlock()
		return f, nil
	})
}

// pull fetches what the cache lacks of the package d from src and writes it
// there, the blob d last. orig is the repository as given, before any
// rewrite, which selects the pull secrets; it also returns the Secrets
// tried.
func (c *Client) pull(ctx context.Context, orig string, src source, d v1.Hash) ([]string, error) {
	release, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	repo := src.ref.Context()
	puller, tried, err := c.puller(ctx, orig, repo)
	if err != nil {
		return tried, err
	}
	return tried, c.pullWith(ctx, puller, repo, d)
}

// pullWith is pull's work with puller.
func (c *Client) pullWith(ctx context.Context, puller *remote.Puller, repo name.Repository, d v1.Hash) error {
	m, manifests, err := packageManifest(d, func(h v1.Hash) ([]byte, error) { return c.manifest(ctx, puller, repo, h) })
	if err != nil {
		return err
	}
	_, layers := packageLayers(m)
	for _, l := range layers {
		if err := c.pullLayer(ctx, puller, repo, l); err != nil {
			return err
		}
	}
	for _, b := range manifests {
		if c.has(b.digest) {
			continue
		}
		if _, err := c.cache.writeBlob(b.digest, int64(len(b.raw)), bytes.NewReader(b.raw)); err != nil {
			return fmt.Errorf("manifest %s: %w", b.digest, err)
		}
		c.markVerified(b.digest)
	}
	return nil
}

// manifest returns the verified bytes of the manifest d: kept from Digest's
// GET fallback, read from the cache, or fetched by digest from repo.
func (c *Client) manifest(ctx context.Context, puller *remote.Puller, repo name.Repository, d v1.Hash) ([]byte, error) {
	c.mu.Lock()
	raw, ok := c.manifests[d]
	c.mu.Unlock()
	if ok {
		return raw, nil
	}
	if raw, err := c.cache.readManifest(d); err == nil {
		c.markVerified(d)
		return raw, nil
	}
	desc, err := puller.Get(ctx, repo.Digest(d.String()))
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", d, redact.Error(err))
	}
	// go-containerregistry checks this too; the cache must not depend on it.
	if got := sha256Hex(desc.Manifest); d.Algorithm != "sha256" || got != d.Hex {
		return nil, fmt.Errorf("manifest %s: got content with digest sha256:%s: %w", d, got, ErrDigestMismatch)
	}
	return desc.Manifest, nil
}

// pullLayer streams the layer l from repo into the cache unless an intact
// copy is there already.
func (c *Client) pullLayer(ctx context.Context, puller *remote.Puller, repo name.Repository, l v1.Descriptor) error {
	if c.isVerified(l.Digest) {
		return nil
	}
	if err := c.cache.verifyBlob(l.Digest, l.Size); err == nil {
		c.markVerified(l.Digest)
		return nil
	}
	layer, err := puller.Layer(ctx, repo.Digest(l.Digest.String()))
	if err != nil {
		return fmt.Errorf("layer %s: %w", l.Digest, redact.Error(err))
	}
	rc, err := layer.Compressed()
	if err != nil {
		return fmt.Errorf("layer %s: %w", l.Digest, redact.Error(err))
	}
	defer rc.Close()
	if _, err := c.cache.writeBlob(l.Digest, l.Size, rc); err != nil {
		return fmt.Errorf("layer %s: %w", l.Digest, redact.Error(err))
	}
	c.markVerified(l.Digest)
	return nil
}

// puller returns the go-containerregistry Puller for repo, with the
// credentials the keychain gives for repo (a Docker config may hold
// credentials per repository): the cluster's pull secrets for orig (the
// reference or repository as given, before any rewrite; keychainFor) before
// the Docker config. It also returns the Secrets tried.
//
// go-containerregistry pings a registry (GET /v2/) for its auth scheme
// before it talks to each repository. The Client pings each registry once
// instead, and when the registry needs no token (anonymous or basic auth)
// it shares one transport, built with one more ping, between all the
// repositories it reaches there with the same credentials. With token auth
// (Bearer) each repository keeps a transport of its own (a ping and a token
// scoped to it), exactly as go-containerregistry does: a shared bearer
// transport would widen one token to every repository and could hand a
// request a token fetched for another one.
func (c *Client) puller(ctx context.Context, orig string, repo name.Repository) (*remote.Puller, []string, error) {
	kc, tried, err := c.keychainFor(ctx, orig)
	if err != nil {
		return nil, tried, err
	}
	p, err := c.pullerWith(ctx, kc, repo)
	return p, tried, err
}

// pullerWith is puller with the keychain kc.
func (c *Client) pullerWith(ctx context.Context, kc authn.Keychain, repo name.Repository) (*remote.Puller, error) {
	auth, err := authn.Resolve(ctx, kc, repo)
	if err != nil {
		return nil, fmt.Errorf("registry credentials: %w", redact.Error(err))
	}
	cfg, err := authn.Authorization(ctx, auth)
	if err != nil {
		return nil, fmt.Errorf("registry credentials: %w", redact.Error(err))
	}
	id, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("registry credentials: %w", err)
	}
	registry := repo.Scheme() + "://" + repo.RegistryStr()
	challenge, err := c.challenges.do(ctx, registry, func(ctx context.Context) (*transport.Challenge, error) {
		ch, err := transport.Ping(ctx, repo.Registry, c.base)
		return ch, redact.Error(err)
	})
	if err != nil {
		return nil, err
	}
	key := registry + "#" + sha256Hex(id)
	if strings.EqualFold(challenge.Scheme, "bearer") {
		key += "#" + repo.RepositoryStr()
	}
	return c.pullers.do(ctx, key, func(ctx context.Context) (*remote.Puller, error) {
		t, err := transport.NewWithContext(ctx, repo.Registry, auth, c.base, []string{repo.Scope(transport.PullScope)})
		if err != nil {
			return nil, redact.Error(err)
		}
		return remote.NewPuller(remote.WithTransport(t))
	})
}

func (c *Client) lookup(d v1.Hash) *Fetched {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fetched[d]
}

func (c *Client) has(d v1.Hash) bool {
	return c.isVerified(d) || c.cache.has(d)
}

func (c *Client) isVerified(d v1.Hash) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.verified[d]
}

func (c *Client) markVerified(d v1.Hash) {
	c.mu.Lock()
	c.verified[d] = true
	c.mu.Unlock()
}

// acquire takes one of the Options.Jobs slots, waiting until one is free or
// ctx ends, and returns the function that gives it back.
func (c *Client) acquire(ctx context.Context) (func(), error) {
	select {
	case c.slots <- struct{}{}:
		return func() { <-c.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// source is a reference as the caller gave it and as it is pulled.
type source struct {
	match ImageConfigMatch
	ref   name.Reference
}

// source applies the ImageConfig rewrite to ref and parses the result with
// the Options (strictly, plain HTTP only for listed hosts).
func (c *Client) source(ref string) (source, error) {
	m := MatchImageConfigs(ref, c.ics)
	parsed, err := c.opts.ParseReference(m.Rewritten)
	if err != nil {
		return source{}, fmt.Errorf("%s: %w", describe(m), err)
	}
	return source{match: m, ref: parsed}, nil
}

// String names the reference as given and, when an ImageConfig rewrote it,
// where it is pulled from.
func (s source) String() string { return describe(s.match) }

func describe(m ImageConfigMatch) string {
	if m.RewriteImageConfig == "" {
		return m.Reference
	}
	return fmt.Sprintf("%s (pulled from %s, rewritten by ImageConfig %s)", m.Reference, m.Rewritten, m.RewriteImageConfig)
}

// LayersDigestOf returns the sha256 of the digests of layers, in order,
// each followed by a newline: the content digest lockstep records for a
// package image without a base layer (Fetched.LayersDigest).
func LayersDigestOf(layers []v1.Descriptor) v1.Hash {
	var b strings.Builder
	for _, l := range layers {
		b.WriteString(l.Digest.String())
		b.WriteByte('\n')
	}
	return v1.Hash{Algorithm: "sha256", Hex: sha256Hex([]byte(b.String()))}
}
