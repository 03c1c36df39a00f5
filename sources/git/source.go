package git

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/lockstep-gitops/lockstep/internal/redact"
)

// Source is a Git repository lockstep watches: where it is, which ref, which
// directory of declarations, and the credentials to reach it. It is a plain
// value (the CLI's --git-* flags); the clone it keeps lives in CacheDir, so a
// Source can be copied and rebuilt freely, and a restarted agent with the
// same CacheDir continues from its last checkout.
//
// Its behaviour follows Flux's GitRepository (source-controller with
// fluxcd/pkg/git/gogit, docs/design.md#flux-source): a shallow
// single-branch clone without tags, an ls-remote before every later fetch
// that skips the fetch while the ref has not moved, and a force-pushed
// branch followed rather than refused.
type Source struct {
	// URL is the repository: https://, http://, ssh://, scp-like
	// (git@host:org/repo.git) or file://. User information in an http(s) URL
	// is moved into Auth (when Auth sets no credentials of its own) and never
	// stored, logged or returned.
	URL string
	// Ref is what to check out: a branch name, a tag name, a full ref name
	// (refs/heads/..., refs/tags/...) or a full commit hash (40 lowercase
	// hex digits). A name
	// that is both a branch and a tag is the branch, as git clone --branch
	// decides. Empty means the branch the remote's HEAD points to.
	Ref string
	// Path is the directory of declarations inside the repository,
	// slash-separated and relative to its root; empty or "." is the root.
	Path string
	// Auth holds the credentials (see Auth for which apply to which URL).
	Auth Auth
	// CacheDir holds the clones: one directory per URL and Ref below it.
	// Required. lockstep owns its content.
	CacheDir string
	// InsecureHTTP allows sending credentials over a plain http:// URL,
	// which is refused otherwise (Flux's same default).
	InsecureHTTP bool
	// Timeout bounds each Checkout and Push as a whole: the ls-remote, the
	// fetch or the push and everything else they send (the CLI's
	// --git-timeout). A remote that accepts the connection and never
	// answers fails the operation with an error that says "timeout" and
	// matches context.DeadlineExceeded. Zero means DefaultTimeout; a
	// negative value means no bound but the caller's context. go-git honours
	// the context over http(s) and ssh; http(s) requests are also bounded
	// on their own (installHTTPClient).
	Timeout time.Duration
	// Verify, when set, makes Checkout verify the signature of the commit
	// (or tag) before it checks it out, as Flux's GitRepository
	// spec.verify does; see Verification.
	Verify *Verification
}

// RefKind says what a Source's Ref names.
type RefKind string

// The kinds of ref.
const (
	// RefBranch is a branch: it moves, and is polled.
	RefBranch RefKind = "branch"
	// RefTag is a tag: it is polled too, since a tag can be moved.
	RefTag RefKind = "tag"
	// RefCommit is a commit: it never changes, and is fetched once.
	RefCommit RefKind = "commit"
)

// Artifact is one checkout of a Source: the commit its ref pointed at and
// the directory holding it. The directory stays as it is until the next
// Checkout of the same Source (Push never touches it).
type Artifact struct {
	// URL is the Source's URL, redacted (internal/redact.URL).
	URL string
	// Ref is the Source's Ref as given.
	Ref string
	// RefName is the full name of the ref that was checked out
	// (refs/heads/main, refs/tags/v1.2.0); empty for a commit.
	RefName string
	// Kind is what the ref names.
	Kind RefKind
	// Commit is the full hash of the checked-out commit (a tag is peeled to
	// its commit).
	Commit string
	// Revision is Flux's revision string: "<branch or tag>@sha1:<commit>",
	// or "sha1:<commit>" for a commit ref.
	Revision string
	// CommitTime is the committer time of Commit.
	CommitTime time.Time
	// Subject is the first line of Commit's message.
	Subject string
	// Root is the checked-out worktree.
	Root string
	// Path is the Source's Path, cleaned ("." for the root).
	Path string
	// Dir is Root joined with Path: the directory to give declarations.Load
	// and to read lockstep.lock from.
	Dir string
	// VerifiedBy names the keys whose signatures Source.Verify checked
	// ("commit: OpenPGP key <fingerprint> (<identity>)", "tag: SSH key
	// SHA256:..."); empty without Verify.
	VerifiedBy string
	// Fetched reports whether this Checkout downloaded objects from the
	// remote. It is false when the ref had not moved (only the ls-remote was
	// sent), and for a commit that was already in the cache.
	Fetched bool
}

// FS returns the artifact's declarations directory (Dir) as an fs.FS, for
// declarations.LoadFS.
func (a *Artifact) FS() fs.FS { return os.DirFS(a.Dir) }

// Errors Checkout and Push return; test with errors.Is.
var (
	// ErrRefNotFound: the remote has no branch or tag of that name, or the
	// commit is in none of its branches and tags.
	ErrRefNotFound = errors.New("git ref not found")
	// ErrEmptyRepository: the remote has no commits.
	ErrEmptyRepository = errors.New("git repository is empty")
)

// remoteName is the only remote of a cache clone.
const remoteName = "origin"

// sourceRef is the local ref that records the advertised hash of the last
// checkout; an ls-remote answer equal to it means nothing to fetch.
const sourceRef = plumbing.ReferenceName("refs/lockstep/source")

var commitHashRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

// session is a validated Source, ready to talk to the remote.
type session struct {
	src      Source
	url      string // without user information
	display  string // redacted URL for messages
	auth     transport.AuthMethod
	ca       []byte
	red      redact.Redactor
	dir      string
	path     string
	isCommit bool
	// reused is set by open when it kept an existing clone, which a fresh
	// clone may replace when it cannot be updated.
	reused bool
}

// Validate checks the Source without the network and without touching
// CacheDir: a parseable URL, a CacheDir, a Path inside the repository, a
// valid full ref name, and credentials that fit the URL's scheme (a
// readable SSH key, decrypted with Password when encrypted, and a parseable
// known_hosts for ssh; no credentials over plain http unless InsecureHTTP).
// Errors name the field and never hold a secret.
func (s Source) Validate() error {
	_, err := s.session()
	return err
}

func (s Source) session() (*session, error) {
	if s.URL == "" {
		return nil, errors.New("git source: a URL is required")
	}
	if s.CacheDir == "" {
		return nil, errors.New("git source: a cache directory is required")
	}
	clean, user, pass, err := splitUserinfo(s.URL)
	if err != nil {
		return nil, fmt.Errorf("git source: URL %s: %w", redact.URL(s.URL), errors.New(redact.Text(err.Error())))
	}
	auth := s.Auth
	if (user != "" || pass != "") && auth.Username == "" && auth.Password == "" && auth.BearerToken == "" {
		auth.Username, auth.Password = user, pass
	}
	ep, err := transport.NewEndpoint(clean)
	if err != nil {
		return nil, fmt.Errorf("git source: URL %s: %s", redact.URL(s.URL), redact.Text(err.Error()))
	}
	red := redact.New(append(auth.secrets(), pass, user)...)
	method, ca, err := auth.method(ep, s.InsecureHTTP)
	if err != nil {
		return nil, fmt.Errorf("git source %s: %s", redact.URL(s.URL), red.Text(err.Error()))
	}
	p, err := cleanPath(s.Path)
	if err != nil {
		return nil, err
	}
	if v := s.Verify; v != nil {
		if v.Keys.Len() == 0 {
			return nil, errors.New("git source: signature verification needs at least one trusted key")
		}
		if v.Mode != "" {
			if _, err := ParseVerifyMode(string(v.Mode)); err != nil {
				return nil, fmt.Errorf("git source: %w", err)
			}
		}
	}
	if strings.HasPrefix(s.Ref, "refs/") {
		if err := plumbing.ReferenceName(s.Ref).Validate(); err != nil {
			return nil, fmt.Errorf("git source: ref %q: %w", s.Ref, err)
		}
	}
	installHTTPClient()
	key := sha256.Sum256([]byte(clean + "\n" + s.Ref))
	return &session{
		src:      s,
		url:      clean,
		display:  redact.URL(s.URL),
		auth:     method,
		ca:       ca,
		red:      red,
		dir:      filepath.Join(s.CacheDir, hex.EncodeToString(key[:8])),
		path:     p,
		isCommit: commitHashRE.MatchString(s.Ref),
	}, nil
}

// splitUserinfo returns raw without its secrets (redact.URL: no user
// information for http and https, no password for other schemes) and the
// http(s) user information it removed, which becomes basic auth.
func splitUserinfo(raw string) (clean, user, pass string, err error) {
	if !strings.Contains(raw, "://") {
		return raw, "", "", nil
	}
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return "", "", "", err
	}
	if ep.Protocol != "http" && ep.Protocol != "https" {
		return redact.URL(raw), "", "", nil
	}
	return redact.URL(raw), ep.User, ep.Password, nil
}

// cleanPath validates a Path and returns it cleaned, "." for the root.
func cleanPath(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	c := path.Clean(p)
	if !filepath.IsLocal(filepath.FromSlash(c)) && c != "." {
		return "", fmt.Errorf("git source: path %q must be relative and stay inside the repository", p)
	}
	return c, nil
}

// dirLocks serialises Checkout and Push on one cache clone within the
// process.
var dirLocks sync.Map

func lockDir(dir string) func() {
	m, _ := dirLocks.LoadOrStore(dir, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// Checkout brings the Source's cache clone to the commit its ref points to
// now and returns it as an Artifact.
//
// The first call for a branch or tag fetches only that ref's tip commit
// (depth 1, no other branches, no tags: a shallow single-branch clone).
// Every later call first asks the remote where the ref points (ls-remote, a
// single request that downloads no objects) and fetches only when it moved;
// a force-pushed ref is followed like any other move, and the worktree is
// reset hard to the new commit, so files deleted upstream disappear. A
// commit ref is fetched once and never contacts the remote again: by its
// hash at depth 1 where the server advertises allow-reachable-sha1-in-want
// otherwise with the history of all branches and
// tags. A cache that cannot be opened or updated is discarded and cloned
// again.
//
// The whole Checkout is bounded by Timeout.
//
// Errors wrap ErrRefNotFound or ErrEmptyRepository where they apply, name
// the redacted URL and the ref, and never hold a credential; a Path missing
// at the commit is an error too.
func (s Source) Checkout(ctx context.Context) (*Artifact, error) {
	ss, err := s.session()
	if err != nil {
		return nil, err
	}
	ctx, cancel, explain := s.withTimeout(ctx)
	defer cancel()
	unlock := lockDir(ss.dir)
	defer unlock()
	a, err := ss.checkout(ctx, false)
	if err != nil && ctx.Err() == nil && !errors.Is(err, ErrRefNotFound) && !errors.Is(err, ErrEmptyRepository) && isCacheProblem(err) {
		// The cache may be damaged: start again from an empty clone once.
		a, err = ss.checkout(ctx, true)
	}
	return a, explain(err)
}

// cacheError marks failures of the local clone (as opposed to the remote),
// which a fresh clone may cure.
type cacheError struct{ err error }

// Error returns the failure's message.
func (e *cacheError) Error() string { return e.err.Error() }

// Unwrap returns the failure.
func (e *cacheError) Unwrap() error { return e.err }

func isCacheProblem(err error) bool {
	var ce *cacheError
	return errors.As(err, &ce)
}

func (ss *session) checkout(ctx context.Context, fresh bool) (*Artifact, error) {
	repo, err := ss.open(fresh)
	if err != nil {
		return nil, err
	}
	if ss.isCommit {
		return ss.checkoutCommit(ctx, repo)
	}
	refs, err := ss.list(ctx, repo)
	if err != nil {
		return nil, err
	}
	name, advertised, err := ss.resolve(refs)
	if err != nil {
		return nil, err
	}
	kind := RefBranch
	if name.IsTag() {
		kind = RefTag
	}
	fetched := false
	if !hasObject(repo, advertised) {
		spec := config.RefSpec("+" + name.String() + ":" + sourceRef.String())
		if err := ss.fetch(ctx, repo, 1, spec); err != nil {
			return nil, err
		}
		fetched = true
	}
	return ss.finish(repo, name, kind, advertised, fetched)
}

// checkoutCommit checks out a commit ref, fetching it only when the cache
// does not hold it.
func (ss *session) checkoutCommit(ctx context.Context, repo *gogit.Repository) (*Artifact, error) {
	h := plumbing.NewHash(ss.src.Ref)
	fetched := false
	if !hasObject(repo, h) {
		// Servers that advertise allow-reachable-sha1-in-want (or
		// allow-tip-sha1-in-want) send just the commit; go-git refuses the
		// request before fetching anything from the others.
		err := ss.fetch(ctx, repo, 1, config.RefSpec("+"+h.String()+":"+sourceRef.String()))
		if err != nil || !hasObject(repo, h) {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err := ss.fetch(ctx, repo, 0,
				config.RefSpec("+refs/heads/*:refs/lockstep/heads/*"),
				config.RefSpec("+refs/tags/*:refs/lockstep/tags/*")); err != nil {
				return nil, err
			}
		}
		if !hasObject(repo, h) {
			return nil, fmt.Errorf("git source %s: commit %s is in no branch or tag: %w", ss.display, h, ErrRefNotFound)
		}
		fetched = true
	}
	return ss.finish(repo, "", RefCommit, h, fetched)
}

// finish checks out the commit advertised points to (peeling a tag), unless
// it is checked out already, records advertised, and builds the Artifact.
func (ss *session) finish(repo *gogit.Repository, name plumbing.ReferenceName, kind RefKind, advertised plumbing.Hash, fetched bool) (*Artifact, error) {
	commit, err := peel(repo, advertised)
	if err != nil {
		return nil, &cacheError{fmt.Errorf("git source %s: %s: %w", ss.display, describeRef(name, advertised), err)}
	}
	var signers string
	if v := ss.src.Verify; v != nil {
		if signers, err = verifyCheckout(repo, v, name, kind, advertised, commit); err != nil {
			return nil, fmt.Errorf("git source %s: %w", ss.display, err)
		}
	}
	head, _ := repo.Head()
	recorded, _ := repo.Reference(sourceRef, false)
	if head == nil || head.Hash() != commit.Hash || recorded == nil || recorded.Hash() != advertised {
		wt, err := repo.Worktree()
		if err != nil {
			return nil, &cacheError{fmt.Errorf("git source %s: %w", ss.display, err)}
		}
		if err := wt.Checkout(&gogit.CheckoutOptions{Hash: commit.Hash, Force: true}); err != nil {
			return nil, &cacheError{fmt.Errorf("git source %s: cannot check out %s: %w", ss.display, commit.Hash, err)}
		}
		if err := repo.Storer.SetReference(plumbing.NewHashReference(sourceRef, advertised)); err != nil {
			return nil, &cacheError{fmt.Errorf("git source %s: %w", ss.display, err)}
		}
	}
	dir := filepath.Join(ss.dir, filepath.FromSlash(ss.path))
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("git source %s: path %q is not a directory at %s", ss.display, ss.path, describeRef(name, commit.Hash))
	}
	a := &Artifact{
		URL:        ss.display,
		Ref:        ss.src.Ref,
		RefName:    name.String(),
		Kind:       kind,
		Commit:     commit.Hash.String(),
		CommitTime: commit.Committer.When,
		Subject:    strings.SplitN(strings.TrimSpace(commit.Message), "\n", 2)[0],
		Root:       ss.dir,
		Path:       ss.path,
		Dir:        dir,
		Fetched:    fetched,
		VerifiedBy: signers,
	}
	a.Revision = "sha1:" + a.Commit
	if name != "" {
		a.Revision = name.Short() + "@" + a.Revision
	}
	return a, nil
}

func describeRef(name plumbing.ReferenceName, h plumbing.Hash) string {
	if name == "" {
		return "commit " + h.String()
	}
	return name.Short() + "@sha1:" + h.String()
}

// open opens the cache clone, or creates an empty one (with the remote
// configured) when there is none, it is damaged, it points elsewhere, or
// fresh is set.
func (ss *session) open(fresh bool) (*gogit.Repository, error) {
	if !fresh {
		repo, err := gogit.PlainOpen(ss.dir)
		if err == nil {
			if r, err := repo.Remote(remoteName); err == nil && len(r.Config().URLs) == 1 && r.Config().URLs[0] == ss.url {
				ss.reused = true
				return repo, nil
			}
		}
	}
	ss.reused = false
	if err := os.RemoveAll(ss.dir); err != nil {
		return nil, fmt.Errorf("git source %s: cannot reset the cache: %w", ss.display, err)
	}
	if err := os.MkdirAll(ss.dir, 0o755); err != nil {
		return nil, fmt.Errorf("git source %s: cache: %w", ss.display, err)
	}
	repo, err := gogit.PlainInit(ss.dir, false)
	if err != nil {
		return nil, fmt.Errorf("git source %s: cache: %w", ss.display, err)
	}
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: remoteName, URLs: []string{ss.url}}); err != nil {
		return nil, fmt.Errorf("git source %s: cache: %w", ss.display, err)
	}
	return repo, nil
}

// list asks the remote for its refs (ls-remote), with peeled tags.
func (ss *session) list(ctx context.Context, repo *gogit.Repository) ([]*plumbing.Reference, error) {
	r, err := repo.Remote(remoteName)
	if err != nil {
		return nil, &cacheError{fmt.Errorf("git source %s: %w", ss.display, err)}
	}
	refs, err := r.ListContext(ctx, &gogit.ListOptions{Auth: ss.auth, CABundle: ss.ca, PeelingOption: gogit.AppendPeeled})
	// A body cut short by the deadline reads as an empty advertisement:
	// only a remote that answered in time is empty.
	if errors.Is(err, transport.ErrEmptyRemoteRepository) && ctx.Err() == nil {
		return nil, fmt.Errorf("git source %s: %w", ss.display, ErrEmptyRepository)
	}
	if err != nil {
		return nil, fmt.Errorf("git source %s: cannot list refs: %w", ss.display, ss.red.Error(err))
	}
	return refs, nil
}

// resolve finds the Source's ref in the remote's refs and returns its full
// name and advertised hash (a tag object for an annotated tag).
func (ss *session) resolve(refs []*plumbing.Reference) (plumbing.ReferenceName, plumbing.Hash, error) {
	byName := map[plumbing.ReferenceName]*plumbing.Reference{}
	for _, r := range refs {
		byName[r.Name()] = r
	}
	var candidates []plumbing.ReferenceName
	switch ref := ss.src.Ref; {
	case ref == "":
		head := byName[plumbing.HEAD]
		if head == nil || head.Type() != plumbing.SymbolicReference {
			return "", plumbing.ZeroHash, fmt.Errorf("git source %s: the remote does not say which branch HEAD is; set the ref: %w", ss.display, ErrRefNotFound)
		}
		candidates = []plumbing.ReferenceName{head.Target()}
	case strings.HasPrefix(ref, "refs/"):
		candidates = []plumbing.ReferenceName{plumbing.ReferenceName(ref)}
	default:
		candidates = []plumbing.ReferenceName{plumbing.NewBranchReferenceName(ref), plumbing.NewTagReferenceName(ref)}
	}
	for _, c := range candidates {
		if r := byName[c]; r != nil && r.Type() == plumbing.HashReference {
			return c, r.Hash(), nil
		}
	}
	what := ss.src.Ref
	if what == "" {
		what = "HEAD"
	}
	if len(refs) == 0 {
		return "", plumbing.ZeroHash, fmt.Errorf("git source %s: %w", ss.display, ErrEmptyRepository)
	}
	return "", plumbing.ZeroHash, fmt.Errorf("git source %s: no branch or tag %q: %w", ss.display, what, ErrRefNotFound)
}

// fetch downloads specs at depth (0 for full history), without tags.
func (ss *session) fetch(ctx context.Context, repo *gogit.Repository, depth int, specs ...config.RefSpec) error {
	err := repo.FetchContext(ctx, &gogit.FetchOptions{
		RemoteName: remoteName,
		RefSpecs:   specs,
		Depth:      depth,
		Auth:       ss.auth,
		CABundle:   ss.ca,
		Tags:       gogit.NoTags,
		Force:      true,
	})
	if err == nil || errors.Is(err, gogit.NoErrAlreadyUpToDate) {
		return nil
	}
	if errors.Is(err, transport.ErrEmptyRemoteRepository) && ctx.Err() == nil {
		return fmt.Errorf("git source %s: %w", ss.display, ErrEmptyRepository)
	}
	wrapped := fmt.Errorf("git source %s: cannot fetch: %w", ss.display, ss.red.Error(err))
	if ss.reused && !remoteFailure(err) {
		return &cacheError{wrapped}
	}
	return wrapped
}

// remoteFailure reports whether err is the remote's or the network's doing
// (credentials, a missing repository, a server or connection error, a
// cancelled context) rather than the local clone's.
func remoteFailure(err error) bool {
	for _, target := range []error{
		context.Canceled, context.DeadlineExceeded,
		transport.ErrAuthenticationRequired, transport.ErrAuthorizationFailed,
		transport.ErrRepositoryNotFound, transport.ErrEmptyRemoteRepository, transport.ErrInvalidAuthMethod,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	var netErr net.Error
	var urlErr *url.Error
	var httpErr *githttp.Err
	return errors.As(err, &netErr) || errors.As(err, &urlErr) || errors.As(err, &httpErr)
}

// hasObject reports whether the cache holds the object h.
func hasObject(repo *gogit.Repository, h plumbing.Hash) bool {
	_, err := repo.Storer.EncodedObject(plumbing.AnyObject, h)
	return err == nil
}

// peel returns the commit h names, following annotated tags.
func peel(repo *gogit.Repository, h plumbing.Hash) (*object.Commit, error) {
	for range 10 {
		obj, err := repo.Storer.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return nil, err
		}
		switch obj.Type() {
		case plumbing.CommitObject:
			return object.DecodeCommit(repo.Storer, obj)
		case plumbing.TagObject:
			t, err := object.DecodeTag(repo.Storer, obj)
			if err != nil {
				return nil, err
			}
			h = t.Target
		default:
			return nil, fmt.Errorf("%s is a %s, not a commit", h, obj.Type())
		}
	}
	return nil, fmt.Errorf("%s: too many nested tags", h)
}
