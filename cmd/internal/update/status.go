package update

import (
	"slices"
	"strings"
	"time"
)

// Status is what an Updater reports about its polls, for the agent's
// status, events and metrics and for `lockstep status` (the last
// poll, what it found, and the last pushed commit; like Flux
// image-automation's lastPushCommit, lastPushTime and observed source
// revision).
type Status struct {
	// Mode is the write-back mode.
	Mode Mode
	// Branch is the branch polls push to (the watched ref in ModeCommit).
	Branch string
	// Schedule is the --update-schedule being followed, empty when polls
	// only run on demand (Poll called directly).
	Schedule string
	// NextPoll is when the next scheduled poll runs; zero without Run.
	NextPoll time.Time
	// Polls and FailedPolls count the polls since the Updater started.
	Polls, FailedPolls int
	// SkippedPolls counts the scheduled polls a Gate skipped (SetGate).
	SkippedPolls int
	// Skipped says why the last scheduled poll was skipped; empty once a
	// poll runs again.
	Skipped string
	// LastPoll is the last poll's result; nil before the first.
	LastPoll *Result
	// LastPushedCommit is the hash of the last commit a poll pushed; empty
	// before the first.
	LastPushedCommit string
	// LastPushBranch is the branch it was pushed to (short name).
	LastPushBranch string
	// LastPushTime is the time of the poll that pushed it (the Clock's).
	LastPushTime time.Time
	// Registries lists, by host, the registries whose last contact failed:
	// polls leave them alone until RetryAfter.
	Registries []RegistryStatus
}

// RegistryStatus is the backoff of one registry.
type RegistryStatus struct {
	// Host is the registry (after ImageConfig rewrites).
	Host string
	// Failures counts the consecutive polls that failed on it.
	Failures int
	// RetryAfter is when polls check it again.
	RetryAfter time.Time
	// LastError is its last error.
	LastError string
}

// Status returns a copy of the Updater's status.
func (u *Updater) Status() Status {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.status
	s.Registries = slices.Clone(s.Registries)
	return s
}

func (u *Updater) setNextPoll(t time.Time, schedule string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.status.NextPoll, u.status.Schedule = t, schedule
}

// record takes a poll's result into the status.
func (s *Status) record(res *Result, registries map[string]*registryState) {
	s.Polls++
	s.Skipped = ""
	if res.Outcome == Failed {
		s.FailedPolls++
	}
	s.LastPoll = res
	if res.Outcome == Pushed && res.Push != nil {
		s.LastPushedCommit = res.Push.Commit
		s.LastPushBranch = strings.TrimPrefix(res.Push.Branch, "refs/heads/")
		s.LastPushTime = res.Time
	}
	s.Registries = s.Registries[:0]
	for h, r := range registries {
		s.Registries = append(s.Registries, RegistryStatus{Host: h, Failures: r.failures, RetryAfter: r.until, LastError: r.lastError})
	}
	slices.SortFunc(s.Registries, func(a, b RegistryStatus) int { return strings.Compare(a.Host, b.Host) })
}
