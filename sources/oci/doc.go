// Package oci is lockstep's access to OCI registries: how references are
// parsed, which hosts may be reached over plain HTTP, and which credentials
// are sent. It wraps go-containerregistry's name, authn and remote packages
// and adds no protocol code of its own.
package oci
