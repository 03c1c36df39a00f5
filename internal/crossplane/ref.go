package crossplane

// PackageRef names one package object: its kind and metadata.name. Its
// String form "Kind/Name" (Provider/provider-nop) is the one lockstep uses
// in messages, inventories and keys; build it here, not by concatenation.
type PackageRef struct {
	Kind Kind
	Name string
}

// Ref returns the reference to the package of kind k named name.
func Ref(k Kind, name string) PackageRef { return PackageRef{Kind: k, Name: name} }

// String returns "Kind/Name", for example "Provider/provider-nop".
func (r PackageRef) String() string { return string(r.Kind) + "/" + r.Name }
