package diff

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
)

// The text and markdown writers render the same outline of a report: a
// tree of lines, each with a mark, a severity and children. Code spans
// (names, paths, values) are wrapped in codeOpen/codeClose, which the text
// writer drops and the markdown writer turns into backtick spans.
const (
	codeOpen  = "\x01"
	codeClose = "\x02"
)

// code marks s as a code span.
func code(s string) string { return codeOpen + s + codeClose }

// severity colours a line.
type severity int

const (
	sevPlain severity = iota
	sevAdded
	sevRemoved
	sevChanged
	sevBreaking
	// sevAttention: not breaking, but a reviewer must look: a re-pinned
	// tag, permissions gained, a storage migration, a warning.
	sevAttention
)

// node is one line of the outline.
type node struct {
	mark byte // '+', '-', '~', '!', '*' or 0 for none
	sev  severity
	text string
	// detail lines are left out of the compact markdown form; the parent
	// then says how many were left out.
	detail bool
	kids   []*node
}

func (n *node) add(mark byte, sev severity, text string) *node {
	c := &node{mark: mark, sev: sev, text: text}
	n.kids = append(n.kids, c)
	return c
}

func (n *node) addDetail(mark byte, sev severity, text string) *node {
	c := n.add(mark, sev, text)
	c.detail = true
	return c
}

// none shows an absent value.
func none(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// arrow shows a change of value.
func arrow(a, b string) string { return code(none(a)) + " → " + code(none(b)) }

// shortDigest cuts a digest to its first 12 hex characters.
func shortDigest(d string) string {
	algo, hex, ok := strings.Cut(d, ":")
	if !ok || len(hex) <= 12 {
		return d
	}
	return algo + ":" + hex[:12]
}

// pinString shows a pin as "v1.2.3 (sha256:abc…)".
func pinString(p *Pin) string {
	if p == nil {
		return ""
	}
	if p.Version == "" {
		return shortDigest(p.Digest)
	}
	return p.Version
}

// versionChange shows how a package's version moves.
func versionChange(pc *PackageChange) string {
	switch {
	case pc.Base == nil:
		return pinString(pc.Head)
	case pc.Head == nil:
		return pinString(pc.Base)
	case pc.Change == Repinned:
		return pc.Head.Version
	case pinString(pc.Base) == pinString(pc.Head):
		return pinString(pc.Head)
	}
	return pinString(pc.Base) + " → " + pinString(pc.Head)
}

// packageTitle is the one-line headline of a package.
func packageTitle(pc *PackageChange) string {
	change := string(pc.Change)
	if pc.Change == Repinned {
		change = "RE-PINNED"
	}
	return fmt.Sprintf("%s %s %s %s", pc.Kind, code(pc.Name), change, versionChange(pc))
}

// packageOutline builds the outline of one package's changes; its own text
// is the headline.
func packageOutline(pc *PackageChange) *node {
	sev := sevChanged
	switch {
	case pc.Breaking:
		sev = sevBreaking
	case pc.Change == Repinned:
		sev = sevAttention
	case pc.Change == Added:
		sev = sevAdded
	case pc.Change == Removed:
		sev = sevRemoved
	}
	n := &node{sev: sev, text: packageTitle(pc)}
	if pc.Breaking {
		n.text += fmt.Sprintf(" (%d breaking)", countBreaking(pc))
	}
	n.add(0, sevPlain, "source "+code(pc.Source))
	if pc.Paused {
		n.add('!', sevAttention, "PAUSED (lockstep.io/paused: \"true\"): apply keeps the installed state; nothing here is applied until the annotation is removed")
	}
	switch {
	case pc.Change == Repinned:
		n.add('!', sevAttention, fmt.Sprintf("RE-PINNED: tag %s was pushed again with other content: digest %s; ask the publisher why before merging",
			code(pc.Head.Version), arrow(shortDigest(pc.Base.Digest), shortDigest(pc.Head.Digest))))
	case pc.Base != nil && pc.Head != nil && pc.Base.Digest != pc.Head.Digest:
		n.add(0, sevPlain, "digest "+arrow(shortDigest(pc.Base.Digest), shortDigest(pc.Head.Digest)))
	case pc.Head != nil:
		n.add(0, sevPlain, "digest "+code(shortDigest(pc.Head.Digest)))
	default:
		n.add(0, sevPlain, "digest "+code(shortDigest(pc.Base.Digest)))
	}
	switch pc.Change {
	case Added:
		n.add(0, sevPlain, declaredNote(pc.Head.Declared))
	case Removed:
		n.add('-', sevRemoved, "lockstep deletes the package, its revisions and runtime; its payload follows the prune rules below")
	}
	if len(pc.Settings) > 0 {
		s := n.add(0, sevPlain, "settings")
		for _, f := range pc.Settings {
			s.add('~', sevChanged, code(f.Field)+": "+arrow(f.Base, f.Head))
		}
	}
	if len(pc.Dependencies) > 0 {
		d := n.add(0, sevPlain, "dependencies")
		for _, dc := range pc.Dependencies {
			switch dc.Change {
			case ChangeAdded:
				d.add('+', sevAdded, fmt.Sprintf("%s %s %s", dc.Kind, code(dc.Source), code(dc.Head)))
			case ChangeRemoved:
				d.add('-', sevRemoved, fmt.Sprintf("%s %s %s", dc.Kind, code(dc.Source), code(dc.Base)))
			default:
				d.add('~', sevChanged, fmt.Sprintf("%s %s %s", dc.Kind, code(dc.Source), arrow(dc.Base, dc.Head)))
			}
		}
	}
	if pc.Payload != nil {
		payloadOutline(n, pc.Payload)
	}
	if pc.Activation != nil {
		activationOutline(n, pc.Activation)
	}
	if pc.Runtime != nil {
		runtimeOutline(n, pc.Runtime)
	}
	if len(pc.RBAC) > 0 {
		r := n.add(0, sevPlain, "RBAC")
		for _, rc := range pc.RBAC {
			roleOutline(r, &rc)
		}
	}
	return n
}

func declaredNote(declared bool) string {
	if declared {
		return "declared in Git"
	}
	return "installed as a dependency"
}

// payloadCounts summarises a payload change in one line.
func payloadCounts(p *PayloadChange) string {
	count := func(refs []ObjectRef) string {
		by := map[Category]int{}
		for _, r := range refs {
			by[r.Category]++
		}
		var parts []string
		for _, c := range []Category{CategoryCRD, CategoryXRD, CategoryComposition, CategoryOther} {
			if by[c] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", by[c], categoryWord(c, by[c])))
			}
		}
		return strings.Join(parts, ", ")
	}
	var parts []string
	if len(p.Added) > 0 {
		parts = append(parts, "added "+count(p.Added))
	}
	if len(p.Removed) > 0 {
		refs := make([]ObjectRef, len(p.Removed))
		for i := range p.Removed {
			refs[i] = p.Removed[i].ObjectRef
		}
		parts = append(parts, "removed "+count(refs))
	}
	var changed []ObjectRef
	for _, d := range p.Definitions {
		changed = append(changed, d.ObjectRef)
	}
	for range p.Compositions {
		changed = append(changed, ObjectRef{Category: CategoryComposition})
	}
	for range p.Modified {
		changed = append(changed, ObjectRef{Category: CategoryOther})
	}
	if len(changed) > 0 {
		parts = append(parts, "changed "+count(changed))
	}
	parts = append(parts, fmt.Sprintf("%d unchanged", p.Unchanged))
	return strings.Join(parts, "; ")
}

// categoryWord names n objects of a category.
func categoryWord(c Category, n int) string {
	if c == CategoryOther {
		return plural(n, "other object")
	}
	return plural(n, string(c))
}

// plural returns word, or for a count other than one its plural.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func payloadOutline(parent *node, p *PayloadChange) {
	title := "payload: " + payloadCounts(p)
	if !p.Installed {
		title = "input schemas (not installed; Composition pipeline inputs must match them): " + payloadCounts(p)
	}
	n := parent.add(0, sevPlain, title)
	for _, r := range p.Added {
		n.addDetail('+', sevAdded, refString(r))
	}
	// Dropped objects, grouped by what happens to them.
	var groups []*node
	byNote := map[string]*node{}
	for _, r := range p.Removed {
		sev, mark := sevRemoved, byte('-')
		if r.Breaking {
			sev, mark = sevBreaking, '!'
		}
		key := string(r.Action) + "\x00" + r.Note
		g := byNote[key]
		if g == nil {
			g = &node{mark: mark, sev: sev, text: fmt.Sprintf("no longer shipped (%s): %s", r.Action, r.Note)}
			byNote[key] = g
			groups = append(groups, g)
		}
		g.add(mark, sev, refString(r.ObjectRef))
	}
	n.kids = append(n.kids, groups...)
	for i := range p.Definitions {
		definitionOutline(n, &p.Definitions[i])
	}
	for i := range p.Compositions {
		compositionOutline(n, &p.Compositions[i])
	}
	for _, m := range p.Modified {
		objectOutline(n, &m)
	}
}

func refString(r ObjectRef) string {
	kind := r.Kind
	switch r.Category {
	case CategoryCRD:
		if r.Kind == "CustomResourceDefinition" {
			kind = "CRD"
		} else {
			kind = "MRD"
		}
	case CategoryXRD:
		kind = "XRD"
	}
	name := r.Name
	if r.Namespace != "" {
		name = r.Namespace + "/" + name
	}
	return kind + " " + code(name)
}

func definitionOutline(parent *node, d *DefinitionChange) {
	sev, mark := sevChanged, byte('~')
	if d.Breaking {
		sev, mark = sevBreaking, '!'
	}
	title := refString(d.ObjectRef)
	if n := definitionBreaking(d); n > 0 {
		title += fmt.Sprintf(" (%d breaking)", n)
	}
	n := parent.add(mark, sev, title)
	if d.APIVersionChange != nil {
		n.add('~', sevChanged, "apiVersion "+arrow(d.APIVersionChange.Base, d.APIVersionChange.Head))
	}
	for _, f := range d.Fields {
		schemaLine(n, f)
	}
	if s := d.StorageVersion; s != nil {
		if s.Base != "" && s.Head != "" {
			n.add('!', sevAttention, fmt.Sprintf("%s version %s: objects stored as %s must be migrated (read and write each one back) before %s is removed from the definition",
				s.Field, arrow(s.Base, s.Head), code(s.Base), code(s.Base)))
		} else {
			n.add('~', sevChanged, fmt.Sprintf("%s version %s", s.Field, arrow(s.Base, s.Head)))
		}
	}
	for i := range d.Versions {
		versionOutline(n, &d.Versions[i])
	}
	objectsOutline(n, d.Objects)
}

// objectsOutline adds what the check of the cluster's custom resources
// found (Report.CheckObjects).
func objectsOutline(n *node, oc *ObjectCheck) {
	if oc == nil {
		return
	}
	if oc.Broken+oc.Pruned == 0 {
		n.add('~', sevChanged, fmt.Sprintf("%d existing custom %s checked on the cluster: none would break", oc.Checked, plural(oc.Checked, "resource")))
		return
	}
	c := n.add('!', sevBreaking, fmt.Sprintf("on the cluster: %d of %d existing custom %s would break (%d %s), %d %s pruned; apply refuses this unless the declaration sets lockstep.io/allow-breaking-upgrade",
		len(objectsOf(oc.Breakages)), oc.Checked, plural(oc.Checked, "resource"), oc.Broken, plural(oc.Broken, "failure"), oc.Pruned, plural(oc.Pruned, "field")))
	for _, b := range oc.Breakages {
		c.addDetail('!', sevBreaking, code(b.String()))
	}
	if more := oc.Broken + oc.Pruned - len(oc.Breakages); more > 0 {
		c.addDetail('!', sevBreaking, fmt.Sprintf("and %d more", more))
	}
}

// objectsOf returns the distinct objects of breakages.
func objectsOf(breakages []crdcheck.Breakage) map[string]bool {
	out := map[string]bool{}
	for _, b := range breakages {
		out[b.Object] = true
	}
	return out
}

func stateString(s *VersionState) string {
	var parts []string
	if s.Served {
		parts = append(parts, "served")
	} else {
		parts = append(parts, "not served")
	}
	if s.Storage {
		parts = append(parts, "storage")
	}
	if s.Deprecated {
		parts = append(parts, "deprecated")
	}
	return strings.Join(parts, ", ")
}

func versionOutline(parent *node, v *VersionChange) {
	switch v.Change {
	case ChangeAdded:
		parent.add('+', sevAdded, fmt.Sprintf("version %s added (%s)", code(v.Name), stateString(v.Head)))
		return
	case ChangeRemoved:
		sev, mark := sevRemoved, byte('-')
		if v.Breaking {
			sev, mark = sevBreaking, '!'
		}
		parent.add(mark, sev, fmt.Sprintf("version %s removed (was %s); objects of it are no longer served, and the API server refuses the update while it is in status.storedVersions", code(v.Name), stateString(v.Base)))
		return
	}
	text := "version " + code(v.Name)
	sev, mark := sevChanged, byte('~')
	if v.Base != nil && v.Head != nil {
		text += ": " + stateString(v.Base) + " → " + stateString(v.Head)
		if v.Base.Served && !v.Head.Served {
			sev, mark = sevBreaking, '!'
		}
	}
	n := parent.add(mark, sev, text)
	breaking, additive := 0, 0
	for _, s := range v.Schema {
		if s.Breaking {
			breaking++
		} else {
			additive++
		}
	}
	for _, s := range v.Schema {
		schemaLine(n, s)
	}
	if breaking+additive > 0 {
		n.text += fmt.Sprintf(" — %d breaking, %d other schema %s", breaking, additive, plural(additive, "change"))
	}
}

// schemaLine adds one schema or definition change; non-breaking ones are
// details.
func schemaLine(parent *node, s SchemaChange) {
	text := schemaText(s)
	switch {
	case s.Breaking:
		parent.add('!', sevBreaking, text)
	case s.Change == DefaultChanged || s.Change == MergeStrategyChanged || s.Change == DefinitionChanged:
		parent.addDetail('~', sevChanged, text)
	default:
		parent.addDetail('+', sevAdded, text)
	}
}

// schemaText describes a schema change in words.
func schemaText(s SchemaChange) string {
	p := code(s.Path)
	values := func() string {
		if s.Keyword != "" && s.Keyword != "type" {
			return ": " + s.Keyword + " " + arrow(s.Base, s.Head)
		}
		return ": " + arrow(s.Base, s.Head)
	}
	switch s.Change {
	case FieldAdded:
		return fmt.Sprintf("field added %s (%s)", p, s.Head)
	case RequiredFieldAdded:
		return fmt.Sprintf("required field added %s (%s)", p, s.Head)
	case FieldRemoved:
		return fmt.Sprintf("field removed %s (%s)", p, s.Base)
	case FieldRequired:
		return "field now required " + p
	case FieldOptional:
		return "field now optional " + p
	case TypeChanged:
		return "type changed " + p + values()
	case TypeWidened:
		return "type widened " + p + values()
	case EnumValuesRemoved:
		return fmt.Sprintf("enum values removed %s: %s", p, code(s.Base))
	case EnumValuesAdded:
		return fmt.Sprintf("enum values added %s: %s", p, code(s.Head))
	case EnumAdded:
		return fmt.Sprintf("enum introduced %s: %s", p, code(s.Head))
	case EnumRemoved:
		return "enum dropped " + p
	case ValidationTightened:
		return "validation tightened " + p + values()
	case ValidationRelaxed:
		return "validation relaxed " + p + values()
	case PatternChanged:
		return "pattern set " + p + ": " + arrow(s.Base, s.Head)
	case PatternRemoved:
		return "pattern dropped " + p + ": " + code(s.Base)
	case FormatChanged:
		return "format set " + p + ": " + arrow(s.Base, s.Head)
	case FormatRemoved:
		return "format dropped " + p + ": " + code(s.Base)
	case RuleAdded:
		return "validation rule added " + p + ": " + code(clip(s.Head))
	case RuleRemoved:
		return "validation rule dropped " + p + ": " + code(clip(s.Base))
	case UnknownFieldsPruned:
		return "unknown fields now pruned " + p
	case UnknownFieldsPreserved:
		return "unknown fields now preserved " + p
	case DefaultChanged:
		return "default changed " + p + ": " + arrow(s.Base, s.Head)
	case MergeStrategyChanged:
		return "merge strategy changed " + p + values()
	case DefinitionChanged:
		return p + ": " + arrow(s.Base, s.Head)
	}
	return string(s.Change) + " " + p + values()
}

func compositionOutline(parent *node, c *CompositionChange) {
	n := parent.add('~', sevChanged, "Composition "+code(c.Name))
	for _, f := range c.Fields {
		n.add('~', sevChanged, code(f.Field)+": "+arrow(f.Base, f.Head))
	}
	for _, f := range c.FunctionsAdded {
		n.add('+', sevAttention, "pipeline calls function "+code(f))
	}
	for _, f := range c.FunctionsRemoved {
		n.add('-', sevRemoved, "pipeline no longer calls function "+code(f))
	}
	for _, s := range c.Steps {
		switch s.Change {
		case ChangeAdded:
			n.add('+', sevAdded, fmt.Sprintf("step %s added: function %s, input %s", code(s.Step), code(s.HeadFunction), code(none(s.HeadInput))))
		case ChangeRemoved:
			n.add('-', sevRemoved, fmt.Sprintf("step %s removed (function %s)", code(s.Step), code(s.BaseFunction)))
		default:
			var parts []string
			if s.BaseFunction != s.HeadFunction {
				parts = append(parts, "function "+arrow(s.BaseFunction, s.HeadFunction))
			}
			if s.BaseInput != s.HeadInput {
				parts = append(parts, "input "+arrow(s.BaseInput, s.HeadInput))
			} else if s.InputChanged {
				parts = append(parts, "input changed")
			}
			n.add('~', sevChanged, fmt.Sprintf("step %s: %s", code(s.Step), strings.Join(parts, "; ")))
		}
	}
	for _, f := range c.MissingFunctions {
		n.add('!', sevAttention, "calls function "+code(f)+", which no Function in the head lock is named")
	}
	if c.OtherChanges {
		n.add('~', sevChanged, "other spec fields change")
	}
}

func objectOutline(parent *node, o *ObjectChange) {
	name := code(o.Name)
	switch o.Change {
	case ChangeAdded:
		parent.add('+', sevAdded, o.Kind+" "+name+" added")
		return
	case ChangeRemoved:
		parent.add('-', sevRemoved, o.Kind+" "+name+" removed")
		return
	}
	n := parent.add('~', sevChanged, o.Kind+" "+name)
	for _, f := range o.Fields {
		n.add('~', sevChanged, code(f.Field)+": "+arrow(f.Base, f.Head))
	}
	if o.MoreFields > 0 {
		n.add(0, sevPlain, fmt.Sprintf("… and %d more changed %s", o.MoreFields, plural(o.MoreFields, "field")))
	}
}

func runtimeOutline(parent *node, r *RuntimeChange) {
	n := parent.add(0, sevPlain, "runtime")
	switch {
	case r.Image == nil:
	case r.Image.Base == "":
		n.add('+', sevAdded, "image "+code(r.Image.Head))
	case r.Image.Head == "":
		n.add('-', sevRemoved, "image "+code(r.Image.Base))
	default:
		n.add('~', sevChanged, "image "+arrow(r.Image.Base, r.Image.Head))
	}
	for _, o := range r.Objects {
		objectOutline(n, &o)
	}
	if r.PermissionRequests != nil {
		p := n.add(0, sevPlain, "permissionRequests (spec.controller.permissionRequests)")
		rulesOutline(p, r.PermissionRequests)
	}
	if r.Problem != "" {
		n.add('!', sevAttention, "problem: "+r.Problem)
	}
}

func roleOutline(parent *node, rc *RoleChange) {
	name := code(rc.Name)
	var n *node
	switch rc.Change {
	case ChangeAdded:
		n = parent.add('+', sevAdded, rc.Kind+" "+name+" added")
	case ChangeRemoved:
		parent.add('-', sevRemoved, rc.Kind+" "+name+" removed")
		return
	default:
		n = parent.add('~', sevChanged, rc.Kind+" "+name)
	}
	if rc.Rules != nil {
		rulesOutline(n, rc.Rules)
	}
	for _, f := range rc.Fields {
		n.add('~', sevChanged, code(f.Field)+": "+arrow(f.Base, f.Head))
	}
}

// maxListed bounds how many resources of a new API group are named.
const maxListed = 8

func listSome(items []string) string {
	shown := items
	if len(shown) > maxListed {
		shown = shown[:maxListed]
	}
	quoted := make([]string, len(shown))
	for i, s := range shown {
		quoted[i] = code(s)
	}
	out := strings.Join(quoted, ", ")
	if len(items) > len(shown) {
		out += fmt.Sprintf(" and %d more", len(items)-len(shown))
	}
	return out
}

func rulesOutline(parent *node, r *RuleChanges) {
	for _, g := range r.APIGroupsAdded {
		parent.add('+', sevAttention, fmt.Sprintf("new API group %s: %s on %d %s (%s)", code(groupName(g.Group)), strings.Join(g.Verbs, ", "), len(g.Resources), plural(len(g.Resources), "resource"), listSome(g.Resources)))
	}
	for _, g := range r.ResourcesAdded {
		parent.add('+', sevAttention, fmt.Sprintf("new resource %s: %s", grantString(g), strings.Join(g.Verbs, ", ")))
	}
	for _, g := range r.VerbsAdded {
		parent.add('+', sevAttention, fmt.Sprintf("new %s %s on %s", plural(len(g.Verbs), "verb"), strings.Join(g.Verbs, ", "), grantString(g)))
	}
	for _, u := range r.NonResourceURLsAdded {
		parent.add('+', sevAttention, "new non-resource URL grant "+code(u))
	}
	for _, g := range r.APIGroupsRemoved {
		parent.add('-', sevRemoved, fmt.Sprintf("API group %s no longer granted (%d %s)", code(groupName(g.Group)), len(g.Resources), plural(len(g.Resources), "resource")))
	}
	for _, g := range r.ResourcesRemoved {
		parent.add('-', sevRemoved, fmt.Sprintf("resource %s no longer granted (%s)", grantString(g), strings.Join(g.Verbs, ", ")))
	}
	for _, g := range r.VerbsRemoved {
		parent.add('-', sevRemoved, fmt.Sprintf("%s %s no longer granted on %s", plural(len(g.Verbs), "verb"), strings.Join(g.Verbs, ", "), grantString(g)))
	}
	for _, u := range r.NonResourceURLsRemoved {
		parent.add('-', sevRemoved, "non-resource URL grant removed "+code(u))
	}
}

// grantString names a resource grant: "resource in group", with the object
// name when the grant is limited to one.
func grantString(g ResourceGrant) string {
	s := code(g.Resource)
	if g.ResourceName != "" {
		s += " named " + code(g.ResourceName)
	}
	return s + " in " + code(groupName(g.Group))
}

func groupName(g string) string {
	if g == "" {
		return "core"
	}
	return g
}

// configOutline describes a DeploymentRuntimeConfig or ImageConfig change.
func configOutline(parent *node, kind string, c *ConfigChange) {
	var n *node
	switch c.Change {
	case ChangeAdded:
		n = parent.add('+', sevAdded, kind+" "+code(c.Name)+" added")
	case ChangeRemoved:
		n = parent.add('-', sevRemoved, kind+" "+code(c.Name)+" removed")
	default:
		n = parent.add('~', sevChanged, kind+" "+code(c.Name))
	}
	if len(c.UsedBy) > 0 {
		n.add(0, sevPlain, "used by "+strings.Join(c.UsedBy, ", "))
	}
	for _, f := range c.Fields {
		switch c.Change {
		case ChangeAdded:
			n.add('+', sevAdded, code(f.Field)+": "+code(f.Head))
		case ChangeRemoved:
			n.add('-', sevRemoved, code(f.Field)+": "+code(f.Base))
		default:
			n.add('~', sevChanged, code(f.Field)+": "+arrow(f.Base, f.Head))
		}
	}
	if c.MoreFields > 0 {
		n.add(0, sevPlain, fmt.Sprintf("… and %d more %s", c.MoreFields, plural(c.MoreFields, "field")))
	}
}

// manifestsOutline is the section of the manifests added, removed or
// changed, applied after the packages (docs/design/manifests.md#manifests).
func manifestsOutline(cs []ConfigChange) *node {
	n := &node{sev: sevChanged, text: fmt.Sprintf("Manifests (%d changed)", len(cs))}
	for i := range cs {
		configOutline(n, "manifest", &cs[i])
	}
	return n
}

// verdictLine is the one-line verdict of a report.
func verdictLine(r *Report) string {
	s := &r.Summary
	var parts []string
	for _, c := range []struct {
		n    int
		word string
	}{{s.Added, "added"}, {s.Removed, "removed"}, {s.Upgraded, "upgraded"}, {s.Downgraded, "downgraded"}, {s.Repinned, "re-pinned"}, {s.Replaced, "replaced"}, {s.Configured, "re-configured"}} {
		if c.n > 0 {
			parts = append(parts, strconv.Itoa(c.n)+" "+c.word)
		}
	}
	line := fmt.Sprintf("%d %s changed", len(r.Packages), plural(len(r.Packages), "package"))
	if len(parts) > 0 {
		line += " (" + strings.Join(parts, ", ") + ")"
	}
	line += fmt.Sprintf(", %d unchanged", s.Unchanged)
	line += fmt.Sprintf("; %d breaking %s", s.Breaking, plural(s.Breaking, "change"))
	if s.StorageMigrations > 0 {
		line += fmt.Sprintf("; %d storage %s", s.StorageMigrations, plural(s.StorageMigrations, "migration"))
	}
	if s.PermissionsGained > 0 {
		line += fmt.Sprintf("; %d RBAC %s gained", s.PermissionsGained, plural(s.PermissionsGained, "grant"))
	}
	if s.CRDsActivated > 0 {
		line += fmt.Sprintf("; +%d %s activated", s.CRDsActivated, plural(s.CRDsActivated, "CRD"))
	}
	if s.CRDsDeactivated > 0 {
		line += fmt.Sprintf("; −%d %s deactivated", s.CRDsDeactivated, plural(s.CRDsDeactivated, "CRD"))
		if s.CustomResourcesOrphaned > 0 {
			line += fmt.Sprintf(" (%d %s orphaned)", s.CustomResourcesOrphaned, plural(s.CustomResourcesOrphaned, "custom resource"))
		}
	}
	if s.ObjectsBroken+s.FieldsPruned > 0 {
		line += fmt.Sprintf("; existing custom resources: %d %s, %d %s pruned", s.ObjectsBroken, plural(s.ObjectsBroken, "failure"), s.FieldsPruned, plural(s.FieldsPruned, "field"))
	}
	return line
}

// sideString names a side with its commit.
func sideString(s Side) string {
	c := s.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	switch {
	case c == "":
		return code(s.Name)
	case strings.HasPrefix(s.Commit, s.Name):
		// The side was named by its hash.
		return code(c)
	}
	return code(s.Name) + " (" + code(c) + ")"
}
