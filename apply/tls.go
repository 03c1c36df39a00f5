package apply

import (
	"context"
	"encoding/base64"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// prepareTLS fills p.tls with the data of every TLS Secret the revision's
// runtime requests (rootca.Authority.Data): the live Secret's data when it
// holds a valid certificate for the request, a new certificate signed by
// crossplane-root-ca otherwise.
func (p *pkgRun) prepareTLS(ctx context.Context) error {
	p.tls = map[string]map[string][]byte{}
	for _, o := range p.po.Revision.Runtime {
		if o.TLS == nil {
			continue
		}
		data, err := p.r.ca.Data(ctx, o.TLS, secretData(p.r.live.Object(renderedID(o))))
		if err != nil {
			return fmt.Errorf("%s: %w", o, err)
		}
		p.tls[o.Name] = data
	}
	return nil
}

// secretData decodes the data of a live Secret, nil when there is none.
func secretData(u *unstructured.Unstructured) map[string][]byte {
	if u == nil {
		return nil
	}
	raw, _, _ := unstructured.NestedStringMap(u.Object, "data")
	out := map[string][]byte{}
	for k, v := range raw {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil
		}
		out[k] = b
	}
	return out
}
