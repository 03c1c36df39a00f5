package snapshot_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/lockfile"
)

// TestExpectMRDConversion: the lock decides MRD conversion;
// ExpectMRDConversion (the flag on render, diff, apply and the agent) only
// asserts it, and a value that disagrees fails the check step, even with
// AllowStale, with the lockstep lock command that changes it.
func TestExpectMRDConversion(t *testing.T) {
	set := &declarations.Set{}
	lock := func(c *bool) *lockfile.Lock {
		return &lockfile.Lock{CrossplaneVersion: "v2.1.0", DeclarationsDigest: set.Digest(), CustomToManagedResourceConversion: c}
	}
	cases := []struct {
		name, reason string
		lock         *lockfile.Lock
		opts         []snapshot.Option
		wantErr      string
	}{
		{name: "NoExpectation", reason: "Without the option any decision is taken.", lock: lock(new(true))},
		{name: "AgreesOn", reason: "true agrees with a lock recording true.", lock: lock(new(true)), opts: []snapshot.Option{snapshot.ExpectMRDConversion(true)}},
		{name: "AgreesAbsent", reason: "false agrees with a lock without the field (off).", lock: lock(nil), opts: []snapshot.Option{snapshot.ExpectMRDConversion(false)}},
		{
			name: "DisagreesOff", reason: "false disagrees with a lock recording true.",
			lock: lock(new(true)), opts: []snapshot.Option{snapshot.ExpectMRDConversion(false), snapshot.WithLockName("clusters/prod/lockstep.lock")},
			wantErr: "check: --enable-custom-to-managed-resource-conversion=false disagrees with clusters/prod/lockstep.lock, which has MRD conversion on (field customToManagedResourceConversion): " +
				"the lock decides, so that every render of it is the same; run lockstep lock --enable-custom-to-managed-resource-conversion=false and commit lockstep.lock, or drop the flag",
		},
		{
			name: "DisagreesOnStaleAllowed", reason: "true disagrees with a lock recording false, even when a stale lock is allowed (diff).",
			lock: lock(new(false)), opts: []snapshot.Option{snapshot.ExpectMRDConversion(true), snapshot.AllowStale()},
			wantErr: "check: --enable-custom-to-managed-resource-conversion=true disagrees with lockstep.lock, which has MRD conversion off (field customToManagedResourceConversion): " +
				"the lock decides, so that every render of it is the same; run lockstep lock --enable-custom-to-managed-resource-conversion=true and commit lockstep.lock, or drop the flag",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := snapshot.New(set, tc.lock, nil, tc.opts...)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("%s\nNew error: -want +got\n%s", tc.reason, diff)
			}
			var mismatch *snapshot.ConversionMismatchError
			if tc.wantErr != "" && !errors.As(err, &mismatch) {
				t.Errorf("%s\nNew error %v is no ConversionMismatchError", tc.reason, err)
			}
		})
	}
}
