package envtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// namespaceSeq numbers the namespaces Namespace creates in this process.
var namespaceSeq atomic.Int64

// Namespace creates a namespace "<prefix>-<n>", n a number no earlier call
// of this process used, so that the cases of a test on a Shared control
// plane do not see each other's objects, and returns its name. It fails
// the test when the namespace cannot be created (within 30 s).
func (e *Env) Namespace(tb testing.TB, prefix string) string {
	tb.Helper()
	name := fmt.Sprintf("%s-%d", prefix, namespaceSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		tb.Fatalf("namespace %s: %v", name, err)
	}
	return name
}
