package declarations

import (
	"encoding/json"
	"fmt"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
)

// Crossplane returns ic as Crossplane's own pkg.crossplane.io/v1beta1
// ImageConfig type (upstream crossplane/crossplane
// apis/pkg/v1beta1/image_config_types.go), with spec.verification read into
// its typed fields: the form the registry client (sources/oci) takes, so
// that it needs nothing of this package. Load has already checked the
// verification against the CRD's schema; the error, naming the ImageConfig
// and where it was declared, is for an ImageConfig built otherwise.
func (ic ImageConfig) Crossplane() (pkgv1beta1.ImageConfig, error) {
	var out pkgv1beta1.ImageConfig
	b, err := json.Marshal(ic)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		return pkgv1beta1.ImageConfig{}, fmt.Errorf("%s: ImageConfig %s: spec: %w", ic.Location, ic.Name, err)
	}
	return out, nil
}

// CrossplaneImageConfigs converts every ImageConfig of ics with
// ImageConfig.Crossplane, in order; nil for none. The error is the first
// conversion's that fails.
func CrossplaneImageConfigs(ics []ImageConfig) ([]pkgv1beta1.ImageConfig, error) {
	if len(ics) == 0 {
		return nil, nil
	}
	out := make([]pkgv1beta1.ImageConfig, len(ics))
	for i := range ics {
		c, err := ics[i].Crossplane()
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}
