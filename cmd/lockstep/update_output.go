package main

import (
	"time"

	"github.com/lockstep-gitops/lockstep/cmd/internal/update"
	"github.com/lockstep-gitops/lockstep/internal/redact"
)

// updateDocument is what `lockstep update -o json|yaml` prints, under
// lockstep.io/v1alpha1 kind UpdateResult: the poll, and the release
// proposals when --propose-releases asked for them. The exit code is the
// same as without -o.
type updateDocument struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Repository is the polled URL without credentials; Revision the
	// commit polled; LockPath the lock in it.
	Repository string `json:"repository"`
	Revision   string `json:"revision,omitempty"`
	LockPath   string `json:"lockPath,omitempty"`
	// Outcome is the poll's (update.Outcome), Error why it failed.
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
	// Checks counts the tags checked; Changes are the proposed pins.
	Checks  int            `json:"checks"`
	Changes []updateChange `json:"changes"`
	// Skipped are checks not made while a registry backs off.
	Skipped []updateSkipped `json:"skipped,omitempty"`
	// Branch and Commit are where the proposal was pushed, Pushed false
	// when nothing was pushed.
	Branch string `json:"branch,omitempty"`
	Commit string `json:"commit,omitempty"`
	Pushed bool   `json:"pushed"`
	// Releases are the release proposals (--propose-releases).
	Releases []updateRelease `json:"releases,omitempty"`
}

// updateChange is one pin the poll proposes to move.
type updateChange struct {
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Source     string `json:"source"`
	OldVersion string `json:"oldVersion,omitempty"`
	OldDigest  string `json:"oldDigest,omitempty"`
	NewVersion string `json:"newVersion,omitempty"`
	NewDigest  string `json:"newDigest,omitempty"`
	Reason     string `json:"reason"`
	Detail     string `json:"detail"`
}

// updateSkipped is a check not made.
type updateSkipped struct {
	Source   string    `json:"source"`
	Registry string    `json:"registry"`
	Until    time.Time `json:"until"`
}

// updateRelease is one release proposal.
type updateRelease struct {
	Kind       string   `json:"kind"`
	Name       string   `json:"name"`
	Policy     string   `json:"policy"`
	OldVersion string   `json:"oldVersion"`
	NewVersion string   `json:"newVersion,omitempty"`
	Branch     string   `json:"branch,omitempty"`
	Outcome    string   `json:"outcome,omitempty"`
	Skipped    string   `json:"skipped,omitempty"`
	Held       []string `json:"held,omitempty"`
	Newest     string   `json:"newest,omitempty"`
}

// newUpdateDocument returns the document of a poll res against url and,
// when rel is not nil, its release proposals.
func newUpdateDocument(url string, res *update.Result, rel *update.ReleaseResult) *updateDocument {
	doc := &updateDocument{APIVersion: documentAPIVersion, Kind: "UpdateResult", Repository: redact.URL(url),
		Revision: res.Revision, LockPath: res.LockPath, Outcome: string(res.Outcome), Error: res.Error, Checks: len(res.Checks), Changes: []updateChange{}}
	for _, c := range res.Changes {
		doc.Changes = append(doc.Changes, updateChange{Kind: c.Kind, Name: c.Name, Source: c.Source, OldVersion: c.OldVersion, OldDigest: c.OldDigest,
			NewVersion: c.NewVersion, NewDigest: c.NewDigest, Reason: string(c.Reason), Detail: c.Detail})
	}
	for _, s := range res.Skipped {
		doc.Skipped = append(doc.Skipped, updateSkipped{Source: s.Check.Source, Registry: s.Registry, Until: s.Until})
	}
	if p := res.Push; p != nil {
		doc.Branch, doc.Commit, doc.Pushed = p.Branch, p.Commit, p.Pushed
	}
	if rel == nil {
		return doc
	}
	outcomes := map[string]string{}
	for _, c := range rel.Commits {
		outcomes[c.Branch] = string(c.Outcome)
	}
	for _, p := range rel.Proposals {
		doc.Releases = append(doc.Releases, updateRelease{Kind: p.Kind, Name: p.Name, Policy: string(p.Policy), OldVersion: p.OldVersion,
			NewVersion: p.NewVersion, Branch: p.Branch, Outcome: outcomes[p.Branch], Skipped: p.Skipped, Held: p.Held, Newest: p.Newest})
	}
	return doc
}
