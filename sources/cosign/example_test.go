package cosign_test

import (
	"context"
	"fmt"

	"github.com/lockstep-gitops/lockstep/sources/cosign"
)

// The CLI's --verification-key flags name the files that stand for the
// Secrets an ImageConfig's key authorities reference; FileKeys reads
// them, and asks the fallback (here none) for any other Secret.
func ExampleFileKeys() {
	files, err := cosign.ParseKeyFlags([]string{"release/cosign.pub=keys/release.pub"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(files)

	keys := cosign.FileKeys(files, nil)
	_, err = keys(context.Background(), "nightly", "cosign.pub")
	fmt.Println(err)

	_, err = cosign.ParseKeyFlags([]string{"release"})
	fmt.Println(err)
	// Output:
	// map[release/cosign.pub:keys/release.pub]
	// no public key for Secret nightly key cosign.pub: give it with --verification-key nightly=FILE
	// --verification-key "release": want SECRET=FILE or SECRET/KEY=FILE
}
