package agent_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
	"github.com/lockstep-gitops/lockstep/test/gitrepo"
)

// TestAgentVerifiesCommits: the agent trusts one SSH key, given in a
// Secret. A signed commit installs provider-demo. An unsigned commit, and
// then one signed by another key, are refused before anything of them is
// read: the Sync is Stalled with reason CommitSignatureRefused, the last
// verified commit stays applied and drift is still corrected. A signed
// commit after them applies.
func TestAgentVerifiesCommits(t *testing.T) {
	f := newFixture(t, "agent-verify")
	c := f.env.Client
	ctx := context.Background()
	trusted := gitrepo.NewSSHKey(t, "platform@example.com")
	stranger := gitrepo.NewSSHKey(t, "stranger@example.com")
	f.verify = &agent.CommitVerification{Secret: "git-verify"}
	r := f.reconciler(t) // creates the namespace
	if _, err := r.Reconcile(ctx); err == nil || !strings.Contains(err.Error(), `secrets "git-verify" not found`) {
		t.Fatalf("reconcile without the keys' Secret: %v, want it to fail naming the Secret", err)
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "git-verify"},
		Data: map[string][]byte{"platform.pub": trusted.AuthorizedKey}}); err != nil {
		t.Fatal(err)
	}

	f.repo.Dev.Signer = trusted
	f.write(t, "provider.yaml", providerDemo)
	f.lock(t)
	good := f.commit(t, "install provider-demo, signed")
	out := reconcileUntilHealthy(t, r)
	if out.Commit != good {
		t.Fatalf("applied %s, want the signed %s", out.Commit, good)
	}
	image := runtimeDeployment(t, c, f.ns).Spec.Template.Spec.Containers[0].Image

	for _, step := range []struct {
		name   string
		signer interface {
			Sign(io.Reader) ([]byte, error)
		}
		want string
	}{
		{"unsigned", nil, "it is not signed"},
		{"signed by an untrusted key", stranger, "which is not trusted"},
	} {
		f.repo.Dev.Signer = step.signer
		f.write(t, "provider.yaml", strings.Replace(providerDemo, ":v0.1.0", ":v0.2.0", 1))
		f.lock(t)
		bad := f.commit(t, "provider-demo v0.2.0, "+step.name)
		intrude(t, c, f.ns, "evil.example/miner:latest")
		out, err := r.Reconcile(ctx)
		var se *agent.StepError
		if !errors.As(err, &se) || !se.Stalled || se.Reason != agent.ReasonCommitSignatureRefused || !strings.Contains(err.Error(), step.want) {
			t.Fatalf("%s: reconcile: %v, want a stalled %s error saying %q", step.name, err, agent.ReasonCommitSignatureRefused, step.want)
		}
		if out.Reapplied != good || out.Applied {
			t.Errorf("%s: outcome: reapplied %q, applied %v; want %s re-applied", step.name, out.Reapplied, out.Applied, good)
		}
		if got := runtimeDeployment(t, c, f.ns).Spec.Template.Spec.Containers[0].Image; got != image {
			t.Errorf("%s: runtime image %q while the commit is refused, want %q restored", step.name, got, image)
		}
		st := syncStatus(t, c, f.ns)
		if cond := condition(st, agent.ConditionStalled); cond.Status != metav1.ConditionTrue || cond.Reason != agent.ReasonCommitSignatureRefused || !strings.Contains(cond.Message, bad) {
			t.Errorf("%s: Stalled %+v, want True, %s, naming commit %s", step.name, cond, agent.ReasonCommitSignatureRefused, bad)
		}
		if st.LastAppliedCommit != good {
			t.Errorf("%s: last applied commit %s, want %s", step.name, st.LastAppliedCommit, good)
		}
	}

	f.repo.Dev.Signer = trusted
	f.write(t, "provider.yaml", strings.Replace(providerDemo, ":v0.1.0", ":v0.2.0", 1))
	next := f.commit(t, "provider-demo v0.2.0, signed")
	if out := reconcileUntilHealthy(t, r); out.Commit != next {
		t.Errorf("applied %s, want the signed %s", out.Commit, next)
	}
}
