package git_test

import (
	"fmt"

	"github.com/lockstep-gitops/lockstep/sources/git"
)

// ExampleAuthFromSecret reads HTTPS credentials from a Secret's data, with
// the keys Flux's GitRepository uses; printed (also with %#v), an Auth
// names the keys it holds and never their values.
func ExampleAuthFromSecret() {
	auth, err := git.AuthFromSecret(map[string][]byte{
		"username": []byte("platform-bot"),
		"password": []byte("not-printed"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(auth)
	fmt.Printf("%#v\n", auth)

	_, err = git.AuthFromSecret(map[string][]byte{"bearerToken": []byte("t"), "password": []byte("p")})
	fmt.Println(err != nil)
	// Output:
	// git.Auth{username, password: set}
	// git.Auth{username, password: set}
	// true
}
