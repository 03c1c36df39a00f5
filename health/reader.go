package health

import (
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/engine"
	"github.com/fluxcd/cli-utils/pkg/kstatus/polling/statusreaders"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// NewStatusReader returns a kstatus status reader that computes every
// object's status with Compute, for a polling.StatusPoller (and so for
// fluxcd/pkg/ssa's WaitForSetWithContext).
func NewStatusReader(mapper meta.RESTMapper) engine.StatusReader {
	return statusreaders.NewGenericStatusReader(mapper, Compute)
}

// NewStatusPoller returns a kstatus poller on c whose status comes from
// Compute for every kind.
func NewStatusPoller(c client.Reader, mapper meta.RESTMapper) *polling.StatusPoller {
	return polling.NewStatusPoller(c, mapper, polling.Options{
		CustomStatusReaders: []engine.StatusReader{NewStatusReader(mapper)},
	})
}
