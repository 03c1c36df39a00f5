package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// crdWatcher waits for CustomResourceDefinitions to be Established with a
// watch on the API server rather than by polling.
//
// A poll (kstatus, or fluxcd/pkg/ssa's WaitForSet) lists every CRD in full
// each interval: for a provider with 2,000 CRDs that is ~100 MB of JSON per
// poll, decoded into maps, which cost the monolith install more client CPU
// than its applies and most of its peak memory. The watch sends each CRD
// once, then once per status change, and crdWatcher decodes only its name
// and conditions from the stream.
type crdWatcher struct {
	rc rest.Interface
}

// crdsPath is the API path of CustomResourceDefinitions.
const crdsPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

// newJSONClient returns a REST client on cfg for absolute paths that
// speaks JSON (apply decodes the streams it reads itself) and that no
// client-side timeout cuts short: a watch is a long request, the context
// ends it.
func newJSONClient(cfg *rest.Config) (rest.Interface, error) {
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
			Conditions []struct {
				Type    string `json:"type"`
				Status  string `json:"status"`
				Reason  string `json:"reason"`
				Message string `json:"message"`
			} `json:"conditions"`
		} `json:"status"`
		Message string `json:"message"`
		Code    int    `json:"code"`
	} `json:"object"`
}

// errNamesNotAccepted marks a CRD whose names conflict with another's: it
// never becomes Established, so the wait fails at once.
var errNamesNotAccepted = errors.New("names not accepted")

// waitEstablished returns when every CRD named in names is Established
// (condition Established=True), and an error when one reports
// NamesAccepted=False (its names conflict; it cannot become Established),
// when timeout passes (naming the CRDs still waited for), or when ctx ends.
//
// It watches the CRDs labelled instance=<instance> (lockstep labels every
// CRD it applies), or the one CRD by name when names has one element: the
// watch starts without a resourceVersion, so the API server first sends
// every matching CRD as it is now, then each change. A watch the server
// closes (its request timeout, or a watcher too slow for its cache) is
// resumed from the last resourceVersion seen, so the CRDs are not sent
// again; one that expired (410 Gone) starts over.
func (w *crdWatcher) waitEstablished(ctx context.Context, names []string, labelKey, instance string, timeout time.Duration) error {
	pending := make(map[string]bool, len(names))
	for _, n := range names {
		pending[n] = true
	}
	if len(pending) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rv string
	req := func() *rest.Request {
		r := w.rc.Get().AbsPath(crdsPath).Param("watch", "true")
		if rv != "" {
			r = r.Param("resourceVersion", rv).Param("allowWatchBookmarks", "true")
		}
		if len(pending) == 1 {
			for n := range pending {
				return r.Param("fieldSelector", fields.OneTermEqualSelector("metadata.name", n).String())
			}
		}
		return r.Param("labelSelector", labels.SelectorFromSet(labels.Set{labelKey: instance}).String())
	}
	for {
		err := w.watchOnce(ctx, req(), pending, &rv)
		var we *watchError
		if errors.As(err, &we) && we.code == http.StatusGone {
			rv = ""
		}
		switch {
		case len(pending) == 0:
			return nil
		case errors.Is(err, errNamesNotAccepted):
			return err
		case ctx.Err() != nil:
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s not Established after %s", describePending(pending), timeout)
			}
			return ctx.Err()
		case err != nil && !isRetryableWatchError(err):
			return err
		}
		// The server ended the watch: start again, after a short pause
		// when it failed.
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// watchOnce reads one watch stream until pending is empty, the stream
// ends, or an event says a CRD cannot become Established.
func (w *crdWatcher) watchOnce(ctx context.Context, req *rest.Request, pending map[string]bool, rv *string) error {
	body, err := req.Stream(ctx)
	if err != nil {
		return fmt.Errorf("cannot watch CustomResourceDefinitions: %w", err)
	}
	defer body.Close()
	dec := json.NewDecoder(body)
	for len(pending) > 0 {
		var ev crdEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return &watchError{err: err}
		}
		o := &ev.Object
		switch ev.Type {
		case "ERROR":
			return &watchError{err: fmt.Errorf("watch of CustomResourceDefinitions failed: %s", o.Message), code: o.Code}
		case "ADDED", "MODIFIED":
		case "BOOKMARK":
			*rv = o.Metadata.ResourceVersion
			continue
		default:
			continue
		}
		*rv = o.Metadata.ResourceVersion
		if !pending[o.Metadata.Name] {
			continue
		}
		for _, c := range o.Status.Conditions {
			switch {
			case c.Type == "Established" && c.Status == "True":
				delete(pending, o.Metadata.Name)
			case c.Type == "NamesAccepted" && c.Status == "False":
				return fmt.Errorf("CustomResourceDefinition %s: %w: %s: %s", o.Metadata.Name, errNamesNotAccepted, c.Reason, c.Message)
			}
		}
	}
	return nil
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
