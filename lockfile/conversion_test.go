package lockfile

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestConversionDecision: `lockstep lock` records MRD conversion on for a
// new Crossplane v2 lock, keeps what an existing lock records (nothing
// means off, so upgrading lockstep flips no cluster), sets it as
// --enable-custom-to-managed-resource-conversion says, and refuses it on
// for Crossplane v1 (docs/design/activation.md#managed-resource-activation).
func TestConversionDecision(t *testing.T) {
	type want struct {
		recorded *bool
		converts bool
		err      []string
	}
	cases := map[string]struct {
		reason   string
		version  string
		previous *Lock
		explicit *bool
		want     want
	}{
		"NewV2LockOn": {
			reason:  "A new lock for Crossplane v2 records conversion on, as Crossplane v2 converts by default.",
			version: "v2.1.0",
			want:    want{recorded: new(true), converts: true},
		},
		"NewV2PrereleaseOn": {
			reason:  "A prerelease of v2.0.0 has MRDs too.",
			version: "v2.0.0-rc.1",
			want:    want{recorded: new(true), converts: true},
		},
		"NewV1LockNothing": {
			reason:  "A new lock for Crossplane v1 records nothing: v1 has no MRDs.",
			version: "v1.20.0",
			want:    want{},
		},
		"ExistingLockWithoutFieldOff": {
			reason:   "An existing v2 lock written before the field keeps conversion off: upgrading lockstep never flips a running cluster.",
			version:  "v2.1.0",
			previous: &Lock{CrossplaneVersion: "v2.1.0"},
			want:     want{},
		},
		"ExistingV1LockUpgradedOff": {
			reason:   "Moving an existing v1 lock to Crossplane v2 keeps conversion off until it is asked for.",
			version:  "v2.1.0",
			previous: &Lock{CrossplaneVersion: "v1.20.0"},
			want:     want{},
		},
		"ExistingLockKeepsOn": {
			reason:   "An existing lock that records true keeps it.",
			version:  "v2.1.0",
			previous: &Lock{CrossplaneVersion: "v2.1.0", CustomToManagedResourceConversion: new(true)},
			want:     want{recorded: new(true), converts: true},
		},
		"ExistingLockKeepsFalse": {
			reason:   "An existing lock that records false keeps it.",
			version:  "v2.1.0",
			previous: &Lock{CrossplaneVersion: "v2.1.0", CustomToManagedResourceConversion: new(false)},
			want:     want{recorded: new(false)},
		},
		"ExplicitFalse": {
			reason:   "--enable-custom-to-managed-resource-conversion=false on a new v2 lock records false, Crossplane's off switch.",
			version:  "v2.1.0",
			explicit: new(false),
			want:     want{recorded: new(false)},
		},
		"ExplicitTrueOnExisting": {
			reason:   "--enable-custom-to-managed-resource-conversion=true turns an existing lock's conversion on.",
			version:  "v2.1.0",
			previous: &Lock{CrossplaneVersion: "v2.1.0"},
			explicit: new(true),
			want:     want{recorded: new(true), converts: true},
		},
		"V1ExplicitTrueRefused": {
			reason:   "Crossplane v1 has no MRDs: conversion on is refused, naming the lock file and field.",
			version:  "v1.20.0",
			explicit: new(true),
			want:     want{err: []string{"lockstep.lock: customToManagedResourceConversion: true: v1.20.0 is a Crossplane v1 version, which has no ManagedResourceDefinitions", "--enable-custom-to-managed-resource-conversion=false"}},
		},
		"DowngradeToV1WithConversionRefused": {
			reason:   "A lock recording true moved to Crossplane v1 is refused.",
			version:  "v1.20.0",
			previous: &Lock{CrossplaneVersion: "v2.1.0", CustomToManagedResourceConversion: new(true)},
			want:     want{err: []string{"lockstep.lock: customToManagedResourceConversion: true: v1.20.0 is a Crossplane v1 version"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := newMemRegistry()
			m.push(t, reg+"/org/provider-a", "v1.0.0", provA)
			set := declare(t, map[string]string{"a.yaml": decl("Provider", "a", reg+"/org/provider-a:v1.0.0")})
			res, err := resolve(t, m, set, tc.previous, Options{CrossplaneVersion: tc.version, CustomToManagedResourceConversion: tc.explicit})
			if len(tc.want.err) > 0 {
				if missing := errorMissing(err, tc.want.err); len(missing) > 0 {
					t.Fatalf("%s\nResolve error:\n%v\nmissing: %q", tc.reason, err, missing)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nResolve: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want.recorded, res.Lock.CustomToManagedResourceConversion); diff != "" {
				t.Errorf("%s\nrecorded %s: -want +got\n%s", tc.reason, ConversionField, diff)
			}
			converts, err := res.Lock.Converts()
			if err != nil || converts != tc.want.converts {
				t.Errorf("%s\nConverts() = %t, %v; want %t", tc.reason, converts, err, tc.want.converts)
			}
			// The decision survives the lockfile's bytes.
			b, err := Marshal(res.Lock)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse(FileName, b)
			if err != nil {
				t.Fatalf("%s\nParse of the written lock: %v\n%s", tc.reason, err, b)
			}
			if diff := cmp.Diff(tc.want.recorded, back.CustomToManagedResourceConversion); diff != "" {
				t.Errorf("%s\nre-read %s: -want +got\n%s", tc.reason, ConversionField, diff)
			}
		})
	}
}

// TestConversionParse: the field is read as written, absent means off,
// and true for Crossplane v1 is refused naming the file, line and field.
func TestConversionParse(t *testing.T) {
	valid, err := Marshal(sampleLock())
	if err != nil {
		t.Fatal(err)
	}
	with := func(version, field string) string {
		s := strings.Replace(string(valid), "crossplaneVersion: v2.1.0\n", "crossplaneVersion: "+version+"\n"+field, 1)
		if s == string(valid) && (version != "v2.1.0" || field != "") {
			t.Fatal("test setup: crossplaneVersion: v2.1.0 not in the sample lock")
		}
		return s
	}
	cases := map[string]struct {
		reason   string
		in       string
		converts bool
		err      []string
	}{
		"Absent": {
			reason: "A lock without the field (written before it) converts nothing.",
			in:     with("v2.1.0", ""),
		},
		"True": {
			reason:   "true converts.",
			in:       with("v2.1.0", "customToManagedResourceConversion: true\n"),
			converts: true,
		},
		"False": {
			reason: "false converts nothing.",
			in:     with("v2.1.0", "customToManagedResourceConversion: false\n"),
		},
		"V1False": {
			reason: "false is fine for v1.",
			in:     with("v1.20.0", "customToManagedResourceConversion: false\n"),
		},
		"V1True": {
			reason: "true for a v1 version is refused with the file, line and field.",
			in:     with("v1.20.0", "customToManagedResourceConversion: true\n"),
			err:    []string{"lockstep.lock:", "customToManagedResourceConversion: true: v1.20.0 is a Crossplane v1 version, which has no ManagedResourceDefinitions"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l, err := Parse(FileName, []byte(tc.in))
			if len(tc.err) > 0 {
				if missing := errorMissing(err, tc.err); len(missing) > 0 {
					t.Fatalf("%s\nParse error:\n%v\nmissing: %q", tc.reason, err, missing)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nParse: %v", tc.reason, err)
			}
			if got, err := l.Converts(); err != nil || got != tc.converts {
				t.Errorf("%s\nConverts() = %t, %v; want %t", tc.reason, got, err, tc.converts)
			}
		})
	}
}

// TestConversionCheck: `lockstep lock --check` with
// --enable-custom-to-managed-resource-conversion reports a lock that
// records another decision as a changed setting.
func TestConversionCheck(t *testing.T) {
	set := declare(t, map[string]string{})
	cases := map[string]struct {
		reason string
		lock   *Lock
		want   *bool
		stale  []string
	}{
		"NotAsked":  {reason: "Without the flag the decision is not checked.", lock: &Lock{CrossplaneVersion: "v2.1.0"}},
		"Agrees":    {reason: "A lock recording true agrees with true.", lock: &Lock{CrossplaneVersion: "v2.1.0", CustomToManagedResourceConversion: new(true)}, want: new(true)},
		"AbsentOff": {reason: "A lock without the field is off, which agrees with false.", lock: &Lock{CrossplaneVersion: "v2.1.0"}, want: new(false)},
		"Disagrees": {
			reason: "A lock without the field is off; true is a changed setting with the command that sets it.",
			lock:   &Lock{CrossplaneVersion: "v2.1.0"},
			want:   new(true),
			stale:  []string{"lockstep.lock: the lock records customToManagedResourceConversion absent (MRD conversion off), not true; run lockstep lock --enable-custom-to-managed-resource-conversion=true"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.lock.DeclarationsDigest = set.Digest()
			var got []string
			for _, p := range Check(set, tc.lock, Options{CustomToManagedResourceConversion: tc.want}) {
				if p.Kind == SettingChanged {
					got = append(got, p.String())
				}
			}
			if diff := cmp.Diff(tc.stale, got); diff != "" {
				t.Errorf("%s\nsetting problems: -want +got\n%s", tc.reason, diff)
			}
		})
	}
}
