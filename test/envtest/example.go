package envtest

import "fmt"

// RunExample starts a control plane of its own for an Example test, runs
// f with it, and stops it. An Example takes no testing.TB, so it cannot
// use Shared; when the control plane cannot start (no `make testbin`),
// RunExample prints the error instead of calling f, and the Example fails
// on its output.
func RunExample(f func(env *Env)) {
	env, err := Start()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = env.Stop() }()
	f(env)
}
