// Package crdwait waits for CustomResourceDefinitions to be Established,
// with one watch of the API server shared by every waiter of an apply
// rather than a poll: the one wait of lockstep, used by apply for
// the CRDs of a payload and by cmd/internal/agent for the Sync CRD.
//
// A CRD is Established when the API server serves its kind (condition
// Established=True, set by the apiextensions-apiserver's establishing
// controller, kubernetes/apiextensions-apiserver
// pkg/controller/establish/establishing_controller.go); Crossplane waits
// for the same condition before it writes objects of a CRD
// (crossplane/crossplane internal/controller/pkg/revision/establisher.go).
package crdwait

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// Watcher waits for CustomResourceDefinitions to be Established with a
// watch on the API server rather than by polling.
//
// A poll (kstatus, or fluxcd/pkg/ssa's WaitForSet) lists every CRD in full
// each interval: for a provider with 2,000 CRDs that is ~100 MB of JSON per
// poll, decoded into maps, which cost the monolith install more client CPU
// than its applies and most of its peak memory. The watch sends each CRD
// once, then once per status change, in Kubernetes' protobuf encoding,
// which kube-apiserver writes with generated code rather than by
// reflection, and the tracker (Watcher.Track) decodes only its name,
// resourceVersion and conditions, skipping the encoded spec.
type Watcher struct {
	rc rest.Interface
	// accept is the watch's Accept header: acceptWatch.
	accept string
}

// NewWatcher returns a Watcher that watches through rc, a client from
// NewRESTClient. Its watch asks for Kubernetes' protobuf encoding, and
// reads JSON from a server that answers in JSON.
func NewWatcher(rc rest.Interface) *Watcher { return &Watcher{rc: rc, accept: acceptWatch} }

// crdsPath is the API path of CustomResourceDefinitions.
const crdsPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

// NewRESTClient returns a REST client on cfg for absolute paths that
// speaks JSON unless a request asks otherwise (the watch, and apply's LIST
// streams, decode what they read themselves) and that no client-side timeout cuts short: a
// watch is a long request, the context ends it. It returns an error when
// cfg cannot make a client.
func NewRESTClient(cfg *rest.Config) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath = "/"
	c.GroupVersion = nil
	c.ContentType = "application/json"
	c.AcceptContentTypes = "application/json"
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	c.Timeout = 0
	rc, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("cannot build a REST client: %w", err)
	}
	return rc, nil
}

// crdEvent is the part of a watch event on a CustomResourceDefinition that
// the wait reads: its type, the CRD's name and its conditions. For an
// ERROR event the object is a metav1.Status, whose message and code are
// read.
type crdEvent struct {
	Type   string `json:"type"`
	Object struct {
		Metadata struct {
			Name            string `json:"name"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Status struct {
			Conditions []condition `json:"conditions"`
		} `json:"status"`
		Message string `json:"message"`
		Code    int    `json:"code"`
	} `json:"object"`
}

// condition is a condition of a CustomResourceDefinition's status.
type condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// ErrNamesNotAccepted marks a CRD whose names conflict with another's: it
// never becomes Established, so the wait fails at once.
var ErrNamesNotAccepted = errors.New("names not accepted")

// State is what a Tracker last saw of one CRD.
type State struct {
	// ResourceVersion is the resourceVersion of the event, parsed as the
	// etcd revision it is on every etcd-backed API server; 0 when it does
	// not parse.
	ResourceVersion uint64
	// Established is the condition Established=True.
	Established bool
	// NotAccepted is "reason: message" of NamesAccepted=False, "" else.
	NotAccepted string
}

// Want is a CRD to wait for: its name, and the resourceVersion that
// this apply's write of it returned ("" when unknown). A state older than
// the write (an event still in the stream when the waiter came) does not
// settle the wait.
type Want struct {
	// Name is the CRD's name.
	Name string
	// ResourceVersion is what the write of the CRD returned, "" when
	// unknown.
	ResourceVersion string
}

// Tracker follows, for one Apply, the CRDs labelled with its instance
// through one watch that every package of the Apply shares. Packages run
// concurrently; a watch of their own would each receive every labelled
// CRD, in full, at its start and at each change, and the API server deep-
// copies and encodes an event once per watcher: for the AWS family that was
// ~1.8 s of the server's CPU (pprof of kube-apiserver, test/bench
// -profile). The watch starts at the apply's first CRD write or first
// wait, from the apply's LIST when seeded (see Seed), and stops with Stop.
type Tracker struct {
	w        *Watcher
	selector string
	// fields is the field selector, "" for none.
	fields string

	mu      sync.Mutex
	started bool
	state   map[string]State
	// changed is closed, and replaced, whenever state or err changes.
	changed chan struct{}
	// err is set when the watch stopped for good.
	err    error
	cancel context.CancelFunc
	done   chan struct{}

	// from is the resourceVersion of the apply's LIST of the same CRDs,
	// where the watch starts, and listed what that LIST said of a CRD
	// (see Seed); "" and nil without one.
	from   string
	listed func(name string) (State, bool)
}

// Seed makes the watch start at rv, the resourceVersion of a LIST of the
// tracker's CRDs, rather than with every CRD as it is now: the API server
// then sends only the changes after that LIST (the CRDs this apply creates
// or changes, and their status), not every labelled CRD in full once more,
// which for the provider-aws monolith is ~100 MB of JSON to encode. listed
// returns what the LIST said of a CRD: a CRD that no event reports (its
// apply changed nothing) is judged by it. Call Seed before the first Wait.
func (t *Tracker) Seed(rv string, listed func(name string) (State, bool)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.from, t.listed = rv, listed
}

// Selector chooses the CRDs a Tracker watches.
type Selector struct {
	// Labels the CRDs carry (labelSelector), none when empty.
	Labels map[string]string
	// Name of the one CRD to watch (fieldSelector metadata.name), all
	// when "".
	Name string
}

// Track returns a tracker of the CRDs sel chooses. It does not start a
// watch before the first Wait or Start.
func (w *Watcher) Track(sel Selector) *Tracker {
	t := &Tracker{
		w:        w,
		selector: labels.SelectorFromSet(sel.Labels).String(),
		state:    map[string]State{},
		changed:  make(chan struct{}),
	}
	if sel.Name != "" {
		t.fields = fields.OneTermEqualSelector("metadata.name", sel.Name).String()
	}
	return t
}

// Stop ends the watch, if one started, and waits for it to return.
func (t *Tracker) Stop() {
	t.mu.Lock()
	started := t.started
	t.mu.Unlock()
	if started && t.cancel != nil {
		t.cancel()
		<-t.done
	}
}

// Wait returns when every CRD of want is Established (condition
// Established=True, seen no earlier than the write want names), and an
// error when one reports NamesAccepted=False (its names conflict; it
// cannot become Established), when timeout passes (naming the CRDs still
// waited for; a timeout of 0 or less never passes), when the watch fails for good, or when ctx ends.
func (t *Tracker) Wait(ctx context.Context, want []Want, timeout time.Duration) error {
	pending := make(map[string]uint64, len(want))
	for _, c := range want {
		rv, _ := strconv.ParseUint(c.ResourceVersion, 10, 64)
		pending[c.Name] = max(pending[c.Name], rv)
	}
	if len(pending) == 0 {
		return nil
	}
	t.Start()
	var expired <-chan time.Time
	if timeout > 0 {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		expired = timer.C
	}
	for {
		t.mu.Lock()
		if err := t.settle(pending); err != nil {
			t.mu.Unlock()
			return err
		}
		err, changed := t.err, t.changed
		t.mu.Unlock()
		if len(pending) == 0 {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-expired:
			names := make(map[string]bool, len(pending))
			for n := range pending {
				names[n] = true
			}
			return fmt.Errorf("%s not Established after %s", describePending(names), timeout)
		}
	}
}

// settle removes from pending every CRD seen Established at or after the
// resourceVersion it waits for, reading a CRD not yet seen from the LIST
// once; a CRD whose names are not accepted is an error. t.mu is held.
func (t *Tracker) settle(pending map[string]uint64) error {
	for name, minRV := range pending {
		st, ok := t.state[name]
		if !ok && t.listed != nil {
			// Decoded once: any later event replaces it.
			if st, ok = t.listed(name); ok {
				t.state[name] = st
			}
		}
		if !ok || (minRV != 0 && st.ResourceVersion != 0 && st.ResourceVersion < minRV) {
			continue
		}
		if st.NotAccepted != "" {
			return fmt.Errorf("CustomResourceDefinition %s: %w: %s", name, ErrNamesNotAccepted, st.NotAccepted)
		}
		if st.Established {
			delete(pending, name)
		}
	}
	return nil
}

// Start starts the watch once: at the apply's first write of a CRD, or
// at its first wait.
func (t *Tracker) Start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started {
		return
	}
	t.started = true
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel, t.done = cancel, make(chan struct{})
	go t.loop(ctx, t.from)
}

// loop keeps the watch open until ctx ends. It starts from rv, or without
// a resourceVersion when rv is "": the API server then first sends every
// labelled CRD as it is now, then each change. A watch the server closes
// (its request timeout, or a watcher too slow for its cache) is resumed
// from the last resourceVersion seen, so the CRDs are not sent again; one
// that expired (410 Gone) starts over without a resourceVersion,
// forgetting what it saw, and no longer consults the LIST.
func (t *Tracker) loop(ctx context.Context, rv string) {
	defer close(t.done)
	for {
		err := t.watchOnce(ctx, rv, &rv)
		if ctx.Err() != nil {
			return
		}
		var we *watchError
		if errors.As(err, &we) && we.code == http.StatusGone {
			rv = ""
		}
		if err != nil && !isRetryableWatchError(err) {
			t.update(func() { t.err = err })
			return
		}
		// The server ended the watch: start again, after a short pause
		// when it failed.
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// update runs f under the lock and wakes the waiters.
func (t *Tracker) update(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f()
	close(t.changed)
	t.changed = make(chan struct{})
}

// watchOnce reads one watch stream, from resourceVersion from ("" for the
// current state first), until it ends; last is set to the last
// resourceVersion seen.
func (t *Tracker) watchOnce(ctx context.Context, from string, last *string) error {
	r := t.w.rc.Get().AbsPath(crdsPath).Param("watch", "true").SetHeader("Accept", t.w.accept)
	if t.selector != "" {
		r = r.Param("labelSelector", t.selector)
	}
	if t.fields != "" {
		r = r.Param("fieldSelector", t.fields)
	}
	if from != "" {
		r = r.Param("resourceVersion", from).Param("allowWatchBookmarks", "true")
	}
	body, err := r.Stream(ctx)
	if err != nil {
		return &watchError{err: fmt.Errorf("cannot watch CustomResourceDefinitions: %w", err), code: statusCode(err)}
	}
	defer body.Close()
	if from == "" {
		t.update(func() { clear(t.state); t.listed = nil })
	}
	events := newEventReader(body)
	var ev crdEvent
	for {
		if err := events.next(&ev); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return &watchError{err: err}
		}
		o := &ev.Object
		switch ev.Type {
		case "ERROR":
			return &watchError{err: fmt.Errorf("watch of CustomResourceDefinitions failed: %s", o.Message), code: o.Code}
		case "BOOKMARK":
			*last = o.Metadata.ResourceVersion
		case "DELETED":
			*last = o.Metadata.ResourceVersion
			t.update(func() { delete(t.state, o.Metadata.Name) })
		case "ADDED", "MODIFIED":
			*last = o.Metadata.ResourceVersion
			st := stateOf(&ev)
			t.update(func() { t.state[o.Metadata.Name] = st })
		}
	}
}

// stateOf returns the state of the CRD in ev.
func stateOf(ev *crdEvent) State {
	o := &ev.Object
	st := State{}
	st.ResourceVersion, _ = strconv.ParseUint(o.Metadata.ResourceVersion, 10, 64)
	for _, c := range o.Status.Conditions {
		switch {
		case c.Type == "Established" && c.Status == "True":
			st.Established = true
		case c.Type == "NamesAccepted" && c.Status == "False":
			st.NotAccepted = c.Reason + ": " + c.Message
		}
	}
	return st
}

// statusCode returns the HTTP status of an API error, 0 for others.
func statusCode(err error) int {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return int(se.Status().Code)
	}
	return 0
}

// watchError is a watch stream that broke or reported an error.
type watchError struct {
	err  error
	code int
}

func (e *watchError) Error() string { return e.err.Error() }
func (e *watchError) Unwrap() error { return e.err }

// isRetryableWatchError reports whether a watch that failed with err is
// started again: a broken stream, an expired resource version (410), or a
// server error.
func isRetryableWatchError(err error) bool {
	var we *watchError
	if !errors.As(err, &we) {
		return false
	}
	return we.code == 0 || we.code == http.StatusGone || we.code >= 500
}

// describePending names up to five CRDs of pending, sorted, with the count
// of the rest: "3 CustomResourceDefinitions (a, b, c)".
func describePending(pending map[string]bool) string {
	names := make([]string, 0, len(pending))
	for n := range pending {
		names = append(names, n)
	}
	sort.Strings(names)
	shown := names
	if len(shown) > 5 {
		shown = shown[:5]
	}
	s := strings.Join(shown, ", ")
	if len(names) > len(shown) {
		s += fmt.Sprintf(" and %d more", len(names)-len(shown))
	}
	noun := "CustomResourceDefinitions"
	if len(names) == 1 {
		noun = "CustomResourceDefinition"
	}
	return fmt.Sprintf("%d %s (%s)", len(names), noun, s)
}

// StateOf returns the State of the CRD whose JSON is raw, as a LIST item
// holds it: its resourceVersion and conditions. It returns an error when raw
// is not a JSON object.
func StateOf(raw []byte) (State, error) {
	var ev crdEvent
	if err := json.Unmarshal(raw, &ev.Object); err != nil {
		return State{}, fmt.Errorf("CustomResourceDefinition: %w", err)
	}
	return stateOf(&ev), nil
}
