package apply

import (
	"bytes"
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/render"
)

// writeInventory applies inv when it differs from what the cluster holds.
func (r *run) writeInventory(ctx context.Context, inv *inventory.Inventory) error {
	b, err := inv.Encode()
	if err != nil {
		return err
	}
	old, err := r.live.inventory.Encode()
	if err != nil {
		return err
	}
	if r.live.inventoryExists && bytes.Equal(b, old) {
		return nil
	}
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":      inventory.ConfigMapName(r.opts.Instance),
			"namespace": r.opts.Namespace,
			"labels": map[string]any{
				render.LabelManagedBy: render.ManagedByValue,
				render.LabelInstance:  r.opts.Instance,
			},
		},
		"data": map[string]any{inventory.DataKey: string(b)},
	}}
	if _, err := r.ssaApply(ctx, cm, FieldManager, false); err != nil {
		return fmt.Errorf("cannot write the inventory ConfigMap %s/%s: %w", r.opts.Namespace, inventory.ConfigMapName(r.opts.Instance), err)
	}
	if !r.opts.DryRun {
		cp := *inv
		cp.Packages = append([]inventory.Package(nil), inv.Packages...)
		r.live.inventory, r.live.inventoryExists = &cp, true
	}
	return nil
}
