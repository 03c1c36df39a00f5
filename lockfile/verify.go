package lockfile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// FindingKind classifies what Verify found wrong with a pin.
type FindingKind string

// The kinds of findings Verify reports. All but RegistryError say the
// lock and its registry disagree; RegistryError says the registry could
// not be asked, so nothing is known about the pin.
const (
	// TagMoved: the pin's tag now points to another digest (re-pushed
	// upstream, or the lock's digest was edited by hand).
	TagMoved FindingKind = "TagMoved"
	// TagMissing: the registry no longer has the pin's tag.
	TagMissing FindingKind = "TagMissing"
	// DigestMissing: the registry no longer serves the pinned digest, so
	// the lock cannot be installed on a cluster without the package cache.
	DigestMissing FindingKind = "DigestMissing"
	// ContentMismatch: the package at the pinned digest is not what the
	// lock records about it (a *ContentError).
	ContentMismatch FindingKind = "ContentMismatch"
	// RegistryError: the registry could not be asked (timeout, refused
	// connection, 5xx, authentication).
	RegistryError FindingKind = "RegistryError"
)

// Finding is one problem Verify found with one pin.
type Finding struct {
	// Entry is the lock entry concerned, a pointer into the verified lock.
	Entry *Entry
	// Kind classifies the finding.
	Kind FindingKind
	// Err explains it, naming the entry.
	Err error
}

// String is the finding's message.
func (f Finding) String() string { return f.Err.Error() }

// Verify checks, online and without writing, that every pin of lock still
// holds in its registry, for CI on a schedule (`lockstep lock --verify`):
// for an entry with a version, the tag still resolves to the pinned digest
// (one HEAD, as Resolve asks it); and the package at the pinned digest,
// pulled through reg, holds what the entry records (CheckContent). A
// digest-only pin has no tag to check. Calls run in parallel, at most
// opts.Jobs at a time (DefaultJobs when 0); each has the deadline reg
// gives it (sources/oci's --registry-timeout). lockName names the lock in
// messages. The findings come in the lock's order, and for one entry in
// the order of the kinds above; none means every pin verified. A 404 from
// the registry is TagMissing or DigestMissing; any other failure to ask is
// RegistryError, after which that pin is not pulled.
func Verify(ctx context.Context, lockName string, lock *Lock, reg Registry, opts Options) []Finding {
	jobs := opts.Jobs
	if jobs <= 0 {
		jobs = DefaultJobs
	}
	u := &run{opts: opts}
	var (
		mu  sync.Mutex
		out []Finding
		wg  sync.WaitGroup
		sem = make(chan struct{}, jobs)
	)
	add := func(e *Entry, k FindingKind, format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		out = append(out, Finding{Entry: e, Kind: k, Err: fmt.Errorf("%s: %s %s: %w", lockName, e.Kind, e.Name, fmt.Errorf(format, args...))})
	}
	for i := range lock.Packages {
		e := &lock.Packages[i]
		repo, err := u.parseRepository(e.Source)
		if err != nil {
			add(e, RegistryError, "source %s: %w", e.Source, err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := acquire(ctx, sem); err != nil {
				add(e, RegistryError, "not verified: %w", err)
				return
			}
			defer func() { <-sem }()
			if e.Version != "" && !verifyTag(ctx, reg, repo.Tag(e.Version), e, add) {
				return // the registry did not answer; pulling would say it again
			}
			f, err := reg.Package(ctx, repo.Digest(e.Digest))
			switch {
			case notFound(err):
				add(e, DigestMissing, "the registry no longer serves digest %s (%s@%s): %w", e.Digest, e.Source, e.Digest, err)
			case err != nil:
				add(e, RegistryError, "cannot pull %s@%s: %w", e.Source, e.Digest, err)
			default:
				if err := CheckContent(lockName, e, ContentOf(e.Source, f)); err != nil {
					mu.Lock()
					out = append(out, Finding{Entry: e, Kind: ContentMismatch, Err: err})
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	order := map[*Entry]int{}
	for i := range lock.Packages {
		order[&lock.Packages[i]] = i
	}
	kinds := []FindingKind{TagMoved, TagMissing, DigestMissing, ContentMismatch, RegistryError}
	slices.SortStableFunc(out, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(order[a.Entry], order[b.Entry]), cmp.Compare(slices.Index(kinds, a.Kind), slices.Index(kinds, b.Kind)))
	})
	return out
}

// verifyTag reports a tag that no longer points to e's digest. It
// returns false when the registry could not be asked (RegistryError).
func verifyTag(ctx context.Context, reg Registry, tag name.Tag, e *Entry, add func(*Entry, FindingKind, string, ...any)) bool {
	h, err := reg.Digest(ctx, tag)
	switch {
	case notFound(err):
		add(e, TagMissing, "the registry no longer has tag %s of %s, pinned at %s: %w", e.Version, e.Source, e.Digest, err)
	case err != nil:
		add(e, RegistryError, "cannot resolve tag %s of %s: %w", e.Version, e.Source, err)
		return false
	case h.String() != e.Digest:
		add(e, TagMoved, "tag %s now points to %s, but the lock pins %s (re-pushed upstream, or the digest was edited by hand; "+
			"review the new image, then run lockstep lock --update %s to pin it)", e.Version, h, e.Digest, e.Name)
	}
	return true
}

// notFound reports whether err is the registry's 404: the tag, manifest
// or repository does not exist.
func notFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusNotFound
}
