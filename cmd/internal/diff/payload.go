package diff

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
)

// payloadItem is one payload object on one side: raw for a Function's
// input CRD, obj for a rendered object, whose JSON (a new copy for a
// relabelled payload object, render.Object.JSON) is made only while the
// two sides are compared.
type payloadItem struct {
	ref ObjectRef
	gk  schema.GroupKind
	raw []byte
	obj *render.Object
}

// json returns the item's JSON.
func (p *payloadItem) json() []byte {
	if p.obj != nil {
		return p.obj.JSON()
	}
	return p.raw
}

func (p payloadItem) key() string {
	return p.gk.Group + "/" + p.gk.Kind + "/" + p.ref.Namespace + "/" + p.ref.Name
}

func category(gk schema.GroupKind) Category {
	switch gk {
	case crossplane.GroupKindCRD, crossplane.GroupKindMRD:
		return CategoryCRD
	case crossplane.GroupKindXRD:
		return CategoryXRD
	case crossplane.GroupKindComposition:
		return CategoryComposition
	}
	return CategoryOther
}

// payloadItems returns a package's payload as lockstep applies it (the
// rendered payload), or for a Function the input CRDs of its contents,
// which are not installed. installed says which.
func payloadItems(p *pkgState) (items []payloadItem, installed bool) {
	if p == nil {
		return nil, true
	}
	if !p.entry.Kind.Descriptor().InstallsPayload {
		if p.contents == nil {
			return nil, false
		}
		for i := range p.contents.Objects {
			o := &p.contents.Objects[i]
			gk := o.GroupKind()
			items = append(items, payloadItem{
				ref: ObjectRef{Category: category(gk), APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name},
				gk:  gk, raw: o.Raw,
			})
		}
		return items, false
	}
	if p.out == nil {
		return nil, true
	}
	for _, o := range p.out.Revision.Payload {
		gk := o.GroupKind()
		items = append(items, payloadItem{
			ref: ObjectRef{Category: category(gk), APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name},
			gk:  gk, obj: o,
		})
	}
	return items, true
}

// payload compares a package's payload. A package whose digest does not
// change ships the same payload and is skipped.
func (c *comparer) payload(a, b *pkgState) (*PayloadChange, error) {
	if a != nil && b != nil && a.entry.Digest == b.entry.Digest {
		return nil, nil
	}
	ia, installedA := payloadItems(a)
	ib, installedB := payloadItems(b)
	pc := &PayloadChange{Installed: installedA && installedB}
	byKey := make(map[string]*payloadItem, len(ia))
	for i := range ia {
		byKey[ia[i].key()] = &ia[i]
	}
	seen := make(map[string]bool, len(ib))
	for i := range ib {
		nb := &ib[i]
		k := nb.key()
		seen[k] = true
		na := byKey[k]
		if na == nil {
			pc.Added = append(pc.Added, nb.ref)
			continue
		}
		ra, rb := na.json(), nb.json()
		if bytes.Equal(ra, rb) {
			pc.Unchanged++
			continue
		}
		changed, err := c.payloadObject(pc, nb, ra, rb)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", nb.ref.Kind, nb.ref.Name, err)
		}
		if !changed {
			pc.Unchanged++
		}
	}
	for i := range ia {
		if seen[ia[i].key()] {
			continue
		}
		pc.Removed = append(pc.Removed, c.dropped(ia[i].ref, b == nil, installedA))
	}
	if len(pc.Added) == 0 && len(pc.Removed) == 0 && len(pc.Definitions) == 0 && len(pc.Compositions) == 0 && len(pc.Modified) == 0 {
		return nil, nil
	}
	sortRefs(pc.Added)
	slices.SortFunc(pc.Removed, func(x, y DroppedObject) int { return compareRefs(x.ObjectRef, y.ObjectRef) })
	slices.SortFunc(pc.Definitions, func(x, y DefinitionChange) int { return compareRefs(x.ObjectRef, y.ObjectRef) })
	slices.SortFunc(pc.Compositions, func(x, y CompositionChange) int { return cmp.Compare(x.Name, y.Name) })
	slices.SortFunc(pc.Modified, func(x, y ObjectChange) int { return cmp.Or(cmp.Compare(x.Kind, y.Kind), cmp.Compare(x.Name, y.Name)) })
	return pc, nil
}

// payloadObject compares one object present on both sides whose JSON
// differs (a's is ra, b's rb), and records the change in pc. It reports
// whether anything that matters changed.
func (c *comparer) payloadObject(pc *PayloadChange, b *payloadItem, ra, rb []byte) (bool, error) {
	switch {
	case isDefinition(b.gk):
		d, err := CompareDefinition(ra, rb)
		if err != nil || d == nil {
			return false, err
		}
		pc.Definitions = append(pc.Definitions, *d)
		return true, nil
	case b.gk == crossplane.GroupKindComposition:
		cc, err := compareCompositions(b.ref.Name, ra, rb)
		if err != nil || cc == nil {
			return false, err
		}
		cc.MissingFunctions = c.missingFunctions(rb)
		pc.Compositions = append(pc.Compositions, *cc)
		return true, nil
	}
	f, more, err := diffJSON(ra, rb, c.opts.MaxFieldChanges)
	if err != nil {
		return false, err
	}
	if len(f) == 0 && more == 0 {
		return false, nil
	}
	pc.Modified = append(pc.Modified, ObjectChange{Kind: b.ref.Kind, Name: b.ref.Name, Change: ChangeChanged, Fields: f, MoreFields: more})
	return true, nil
}

// dropped says what lockstep does with a payload object the head no
// longer ships: removed is true when the whole package goes away.
func (c *comparer) dropped(ref ObjectRef, removed, installed bool) DroppedObject {
	d := DroppedObject{ObjectRef: ref}
	switch {
	case !installed:
		d.Action, d.Note = ActionNone, "a Function's input schema; never installed"
	case !removed:
		d.Action = ActionKept
		d.Note = "stays in the cluster owned by the package, no longer controlled by its active revision (as in Crossplane); lockstep status lists it"
	case ref.Category == CategoryCRD:
		d.Action = ActionPruneCRD
		switch c.opts.PruneCRDs.Definition() {
		case plan.DefinitionOrphan:
			d.Note = "orphaned: left in the cluster with its custom resources (--prune-crds=never)"
		case plan.DefinitionDelete:
			d.Note = "deleted with every custom resource of it (--prune-crds=always)"
			d.Breaking = true
		default:
			d.Note = "deleted only if no custom resource of it exists, otherwise orphaned with a warning (--prune-crds=unused)"
		}
	case ref.Category == CategoryXRD:
		d.Action, d.Breaking = ActionDeleted, true
		d.Note = "deleted with the package; Crossplane then deletes its composite resource definition and every composite resource and claim of it"
	default:
		d.Action, d.Note = ActionDeleted, "deleted with the package"
	}
	return d
}

func sortRefs(s []ObjectRef) { slices.SortFunc(s, compareRefs) }

// compareRefs orders objects by category, kind and namespace, then
// definitions by API group (the part of the name after the first dot) and
// everything else by name.
func compareRefs(x, y ObjectRef) int {
	return cmp.Or(cmp.Compare(categoryRank(x.Category), categoryRank(y.Category)), cmp.Compare(x.Kind, y.Kind),
		cmp.Compare(x.Namespace, y.Namespace), cmp.Compare(refGroup(x), refGroup(y)), cmp.Compare(x.Name, y.Name))
}

// refGroup is the API group of a CRD or XRD, named <plural>.<group>; ""
// for other objects.
func refGroup(r ObjectRef) string {
	if r.Category != CategoryCRD && r.Category != CategoryXRD {
		return ""
	}
	_, g, _ := strings.Cut(r.Name, ".")
	return g
}

func categoryRank(c Category) int {
	return slices.Index([]Category{CategoryCRD, CategoryXRD, CategoryComposition, CategoryOther}, c)
}

// missingFunctions returns the functionRef names of a Composition that no
// Function in the head lock is named after.
func (c *comparer) missingFunctions(raw []byte) []string {
	comp, err := decodeComposition(raw)
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range comp.Spec.Pipeline {
		if f := s.FunctionRef.Name; f != "" && !c.headFunctions[f] && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

// compositionDocument is the part of a Composition diff reads.
type compositionDocument struct {
	Spec struct {
		CompositeTypeRef struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		} `json:"compositeTypeRef"`
		Mode     string         `json:"mode"`
		Pipeline []pipelineStep `json:"pipeline"`
	} `json:"spec"`
}

// pipelineStep is one step of a Composition's pipeline.
type pipelineStep struct {
	Step        string `json:"step"`
	FunctionRef struct {
		Name string `json:"name"`
	} `json:"functionRef"`
	Input json.RawMessage `json:"input,omitempty"`
}

func decodeComposition(raw []byte) (*compositionDocument, error) {
	var c compositionDocument
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("cannot decode Composition: %w", err)
	}
	return &c, nil
}

// inputKind returns "apiVersion kind" of a pipeline step's input.
func inputKind(raw json.RawMessage) string {
	var h struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &h) != nil {
		return ""
	}
	return h.APIVersion + " " + h.Kind
}

// compareCompositions compares two versions of a Composition: its
// composite type, mode, and pipeline steps by name with their functionRef
// and input. It returns nil when nothing but metadata labels and
// annotations changes.
func compareCompositions(name string, base, head []byte) (*CompositionChange, error) {
	a, err := decodeComposition(base)
	if err != nil {
		return nil, fmt.Errorf("base: %w", err)
	}
	b, err := decodeComposition(head)
	if err != nil {
		return nil, fmt.Errorf("head: %w", err)
	}
	cc := &CompositionChange{Name: name}
	ta := a.Spec.CompositeTypeRef.APIVersion + " " + a.Spec.CompositeTypeRef.Kind
	tb := b.Spec.CompositeTypeRef.APIVersion + " " + b.Spec.CompositeTypeRef.Kind
	if ta != tb {
		cc.Fields = append(cc.Fields, FieldChange{Field: "spec.compositeTypeRef", Base: ta, Head: tb})
	}
	if a.Spec.Mode != b.Spec.Mode {
		cc.Fields = append(cc.Fields, FieldChange{Field: "spec.mode", Base: a.Spec.Mode, Head: b.Spec.Mode})
	}
	cc.FunctionsAdded, cc.FunctionsRemoved = functionsChanged(a.Spec.Pipeline, b.Spec.Pipeline)
	cc.Steps = stepsChanged(a.Spec.Pipeline, b.Spec.Pipeline)
	// Anything else in the spec: resources, patch sets, write connection
	// secrets, environment...
	other, _, err := diffJSON(base, head, 1, "metadata", "spec.pipeline", "spec.compositeTypeRef", "spec.mode")
	if err != nil {
		return nil, err
	}
	cc.OtherChanges = len(other) > 0
	if len(cc.Fields) == 0 && len(cc.Steps) == 0 && !cc.OtherChanges {
		return nil, nil
	}
	return cc, nil
}

// functionsChanged returns the functions the head pipeline b calls that
// the base a does not, and those a calls that b does not, sorted.
func functionsChanged(a, b []pipelineStep) (added, removed []string) {
	fa, fb := map[string]bool{}, map[string]bool{}
	for _, s := range a {
		fa[s.FunctionRef.Name] = true
	}
	for _, s := range b {
		fb[s.FunctionRef.Name] = true
	}
	for _, f := range sortedKeys(fb) {
		if !fa[f] && f != "" {
			added = append(added, f)
		}
	}
	for _, f := range sortedKeys(fa) {
		if !fb[f] && f != "" {
			removed = append(removed, f)
		}
	}
	return added, removed
}

// stepsChanged compares the pipeline steps of a and b by name: added
// steps and changed ones (function, input kind, input) in b's order, then
// removed ones in a's.
func stepsChanged(a, b []pipelineStep) []StepChange {
	var out []StepChange
	stepsA := map[string]int{}
	for i, s := range a {
		stepsA[s.Step] = i
	}
	seen := map[string]bool{}
	for _, sb := range b {
		seen[sb.Step] = true
		i, ok := stepsA[sb.Step]
		if !ok {
			out = append(out, StepChange{Step: sb.Step, Change: ChangeAdded, HeadFunction: sb.FunctionRef.Name, HeadInput: inputKind(sb.Input)})
			continue
		}
		if st, changed := stepChange(a[i], sb); changed {
			out = append(out, st)
		}
	}
	for _, sa := range a {
		if !seen[sa.Step] {
			out = append(out, StepChange{Step: sa.Step, Change: ChangeRemoved, BaseFunction: sa.FunctionRef.Name, BaseInput: inputKind(sa.Input)})
		}
	}
	return out
}

// stepChange compares two versions of one step, and reports whether its
// function, its input's kind or its input changed.
func stepChange(sa, sb pipelineStep) (StepChange, bool) {
	st := StepChange{Step: sb.Step, Change: ChangeChanged}
	changed := false
	if sa.FunctionRef.Name != sb.FunctionRef.Name {
		st.BaseFunction, st.HeadFunction = sa.FunctionRef.Name, sb.FunctionRef.Name
		changed = true
	}
	if ka, kb := inputKind(sa.Input), inputKind(sb.Input); ka != kb {
		st.BaseInput, st.HeadInput = ka, kb
		changed = true
	}
	if !jsonEqual(sa.Input, sb.Input) {
		st.InputChanged = true
		changed = true
	}
	return st, changed
}

// jsonEqual compares two JSON values semantically.
func jsonEqual(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	va, errA := decodeJSON(a)
	vb, errB := decodeJSON(b)
	if errA != nil || errB != nil {
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}
