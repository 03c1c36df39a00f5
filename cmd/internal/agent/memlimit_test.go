package agent

import (
	"math"
	"testing"

	"github.com/lockstep-gitops/lockstep/render"
)

func TestMemoryLimitFor(t *testing.T) {
	small := &render.Output{}
	cases := map[string]struct {
		reason  string
		ceiling int64
		out     *render.Output
		want    int64
	}{
		"UserChose":   {reason: "a ceiling of 0 (--memory-limit, GOMEMLIMIT) leaves the limit alone", ceiling: 0, out: small, want: 0},
		"NoContainer": {reason: "outside a container the render's limit applies: at least 128 MiB", ceiling: math.MaxInt64, out: small, want: 128 << 20},
		"Container":   {reason: "a container's 90% below the render's limit bounds it", ceiling: 100 << 20, out: small, want: 100 << 20},
		"Render":      {reason: "a render's limit below the container's wins", ceiling: 1 << 30, out: small, want: 128 << 20},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := memoryLimitFor(tc.ceiling, tc.out); got != tc.want {
				t.Errorf("%s\nmemoryLimitFor(%d): %d, want %d", tc.reason, tc.ceiling, got, tc.want)
			}
		})
	}
}
