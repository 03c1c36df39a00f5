package diff

// countBreaking counts the breaking changes of a package: breaking schema
// and definition-wide changes, versions removed or no longer served, and
// dropped objects deleted with their data.
func countBreaking(pc *PackageChange) int {
	n := 0
	for _, f := range pc.Settings {
		// A package whose signature was verified and no longer is.
		if f.Field == "verification" && f.Base != "" && f.Head == "" {
			n++
		}
	}
	if p := pc.Payload; p != nil {
		for _, d := range p.Definitions {
			n += definitionBreaking(&d)
		}
		for _, r := range p.Removed {
			if r.Breaking {
				n++
			}
		}
	}
	return n
}

// definitionBreaking counts the breaking changes of one definition.
func definitionBreaking(d *DefinitionChange) int {
	n := 0
	for _, f := range d.Fields {
		if f.Breaking {
			n++
		}
	}
	for _, v := range d.Versions {
		if v.Change == ChangeRemoved && v.Breaking {
			n++
			continue
		}
		if v.Base != nil && v.Head != nil && v.Base.Served && !v.Head.Served {
			n++
		}
		for _, s := range v.Schema {
			if s.Breaking {
				n++
			}
		}
	}
	return n
}

// gained counts the permissions a RuleChanges adds.
func (r *RuleChanges) gained() int {
	if r == nil {
		return 0
	}
	return len(r.APIGroupsAdded) + len(r.ResourcesAdded) + len(r.VerbsAdded) + len(r.NonResourceURLsAdded)
}

// summarize fills r.Summary from the listed changes.
func summarize(r *Report) {
	s := &r.Summary
	for i := range r.Packages {
		pc := &r.Packages[i]
		switch pc.Change {
		case Added:
			s.Added++
		case Removed:
			s.Removed++
		case Upgraded:
			s.Upgraded++
		case Downgraded:
			s.Downgraded++
		case Repinned:
			s.Repinned++
		case Replaced:
			s.Replaced++
		case Configured:
			s.Configured++
		}
		s.Breaking += countBreaking(pc)
		if p := pc.Payload; p != nil {
			for _, d := range p.Definitions {
				if d.StorageVersion != nil && d.StorageVersion.Base != "" && d.StorageVersion.Head != "" {
					s.StorageMigrations++
				}
			}
		}
		if pc.Runtime != nil {
			s.PermissionsGained += pc.Runtime.PermissionRequests.gained()
		}
		for _, rc := range pc.RBAC {
			s.PermissionsGained += rc.Rules.gained()
		}
		if ac := pc.Activation; ac != nil {
			s.CRDsActivated += len(ac.Activated)
			s.CRDsDeactivated += len(ac.Deactivated)
		}
	}
	switch {
	case s.Breaking > 0:
		s.Verdict = VerdictBreaking
	case len(r.Packages) > 0 || len(r.Lock) > 0 || len(r.RuntimeConfigs) > 0 || len(r.ImageConfigs) > 0 || len(r.ActivationPolicies) > 0 || len(r.Manifests) > 0:
		s.Verdict = VerdictChanges
	default:
		s.Verdict = VerdictNone
	}
}
