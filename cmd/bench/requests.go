package main

import (
	"maps"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Request verbs, as the API server's audit log and RBAC name them, plus
// "apply" for a server-side apply patch (a PATCH with content type
// application/apply-patch+yaml) and "discovery" for /api, /apis, /version
// and /openapi requests.
const (
	verbGet              = "get"
	verbList             = "list"
	verbWatch            = "watch"
	verbCreate           = "create"
	verbUpdate           = "update"
	verbPatch            = "patch"
	verbApply            = "apply"
	verbDelete           = "delete"
	verbDeleteCollection = "deletecollection"
	verbDiscovery        = "discovery"
)

// dryRunSuffix marks a dry-run request in APICounts.ByVerb, e.g.
// "apply (dry-run)".
const dryRunSuffix = " (dry-run)"

// classify returns the verb of an API request, its resource (the plural,
// "RESOURCE/SUBRESOURCE" for a subresource, "" for discovery) and whether it
// is a server-side dry-run (dryRun=All in the query). It follows the API server's
// request info: a GET of a collection is a list (a watch with watch=true or
// a /watch/ path), a GET of one object a get; POST create, PUT update,
// PATCH patch (apply for an apply patch), DELETE delete or deletecollection.
// Paths outside /api/v1 and /apis/GROUP/VERSION resources are discovery.
func classify(method string, u *url.URL, contentType string) (verb, resource string, dryRun bool) {
	q := u.Query()
	dryRun = q.Get("dryRun") != ""
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	// The resource part of the path: after /api/v1 or /apis/GROUP/VERSION.
	var rest []string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		rest = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		rest = parts[3:]
	default:
		return verbDiscovery, "", dryRun
	}
	watch := q.Get("watch") == "true" || q.Get("watch") == "1"
	if len(rest) > 0 && rest[0] == "watch" {
		watch, rest = true, rest[1:]
	}
	// namespaces/NS/RESOURCE... is a namespaced resource; namespaces and
	// namespaces/NAME are the namespaces themselves.
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	named := len(rest) >= 2 // RESOURCE/NAME[/SUBRESOURCE]
	if len(rest) > 0 {
		resource = rest[0]
	}
	if len(rest) >= 3 {
		resource += "/" + rest[2]
	}
	switch method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watch:
			return verbWatch, resource, dryRun
		case named:
			return verbGet, resource, dryRun
		}
		return verbList, resource, dryRun
	case http.MethodPost:
		return verbCreate, resource, dryRun
	case http.MethodPut:
		return verbUpdate, resource, dryRun
	case http.MethodPatch:
		if strings.HasPrefix(contentType, "application/apply-patch") {
			return verbApply, resource, dryRun
		}
		return verbPatch, resource, dryRun
	case http.MethodDelete:
		if named {
			return verbDelete, resource, dryRun
		}
		return verbDeleteCollection, resource, dryRun
	}
	return strings.ToLower(method), resource, dryRun
}

// mutating reports whether verb changes the cluster (unless dry-run).
func mutating(verb string) bool {
	switch verb {
	case verbCreate, verbUpdate, verbPatch, verbApply, verbDelete, verbDeleteCollection:
		return true
	}
	return false
}

// reviews are the resources whose create asks the API server a question
// and stores nothing (authentication.k8s.io and authorization.k8s.io
// reviews, https://kubernetes.io/docs/reference/access-authn-authz/authorization/#checking-api-access):
// APICounts counts them as reads, not as writes.
var reviews = map[string]bool{
	"selfsubjectreviews": true, "selfsubjectaccessreviews": true, "selfsubjectrulesreviews": true,
	"subjectaccessreviews": true, "localsubjectaccessreviews": true, "tokenreviews": true,
}

// APICounts are the API requests a process sent, by verb.
type APICounts struct {
	// Total counts every request.
	Total int `json:"total"`
	// Mutating counts requests that change the cluster: create, update,
	// patch, apply, delete, deletecollection, dry-runs and reviews
	// excepted.
	Mutating int `json:"mutating"`
	// DryRun counts server-side dry-run requests (dryRun=All).
	DryRun int `json:"dryRun"`
	// Reads counts get, list and watch requests, and the creates of
	// reviews, which store nothing.
	Reads int `json:"reads"`
	// Discovery counts discovery and OpenAPI requests.
	Discovery int `json:"discovery"`
	// ByVerb counts requests by verb; dry-runs carry the suffix
	// " (dry-run)".
	ByVerb map[string]int `json:"byVerb"`
	// Timeline holds, per ByVerb key and resource ("apply
	// customresourcedefinitions"), when the first and the last such
	// request was sent, in seconds since the measured phase began: where
	// a run spent its time (dry-runs, then applies, then polling).
	Timeline map[string][2]float64 `json:"timeline,omitempty"`
	// ByResource counts requests per Timeline key (verb and resource,
	// "apply providers/status"): where the requests of a run go.
	ByResource map[string]int `json:"byResource,omitempty"`
}

// add counts one request for resource, sent at seconds since the
// measured phase began.
func (c *APICounts) add(verb, resource string, dryRun bool, at float64) {
	if c.ByVerb == nil {
		c.ByVerb = map[string]int{}
		c.Timeline = map[string][2]float64{}
		c.ByResource = map[string]int{}
	}
	c.Total++
	key := verb
	switch {
	case dryRun:
		c.DryRun++
		key += dryRunSuffix
	case mutating(verb) && !reviews[resource]:
		c.Mutating++
	case verb == verbDiscovery:
		c.Discovery++
	default:
		c.Reads++
	}
	tk := strings.TrimSpace(key + " " + resource)
	if t, ok := c.Timeline[tk]; !ok {
		c.Timeline[tk] = [2]float64{at, at}
	} else {
		c.Timeline[tk] = [2]float64{min(t[0], at), max(t[1], at)}
	}
	c.ByVerb[key]++
	c.ByResource[tk]++
}

// String returns the counts by verb, "apply=12 get=3 ...", sorted.
func (c APICounts) String() string {
	keys := make([]string, 0, len(c.ByVerb))
	for k := range c.ByVerb {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strings.ReplaceAll(k, " ", ""))
		b.WriteByte('=')
		b.WriteString(strconv.Itoa(c.ByVerb[k]))
	}
	return b.String()
}

// apiCounter counts the API requests of every client made from a
// rest.Config it wraps (rest.Config.Wrap(counter.wrap)).
type apiCounter struct {
	mu    sync.Mutex
	c     APICounts
	start time.Time
}

// begin marks the start of the measured phase, for APICounts.Timeline.
func (t *apiCounter) begin() {
	t.mu.Lock()
	t.start = time.Now()
	t.mu.Unlock()
}

// wrap returns a round tripper that counts requests into t and sends them
// on through next.
func (t *apiCounter) wrap(next http.RoundTripper) http.RoundTripper {
	return &countingTransport{next: next, counter: t}
}

// countingTransport is one client's counting http.RoundTripper.
type countingTransport struct {
	next    http.RoundTripper
	counter *apiCounter
}

// RoundTrip counts req and sends it on.
func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, resource, dry := classify(req.Method, req.URL, req.Header.Get("Content-Type"))
	t.counter.mu.Lock()
	t.counter.c.add(verb, resource, dry, time.Since(t.counter.start).Seconds())
	t.counter.mu.Unlock()
	return t.next.RoundTrip(req)
}

// snapshot returns a copy of the counts so far.
func (t *apiCounter) snapshot() APICounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.c
	out.ByVerb = maps.Clone(t.c.ByVerb)
	out.Timeline = maps.Clone(t.c.Timeline)
	return out
}
