package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lockstep-gitops/lockstep/sources/git"
)

// verifyCommitFlags are the flags of `lockstep verify-commit`.
type verifyCommitFlags struct {
	repo string
	mode string
	keys []string
}

func newVerifyCommitCommand() *cobra.Command {
	f := &verifyCommitFlags{}
	cmd := &cobra.Command{
		Use:   "verify-commit [REVISION]",
		Short: "Check that a commit or tag is signed by a trusted key, as the agent checks it",
		Long: `verify-commit checks the signature of a revision of the local Git
repository (default HEAD) against trusted public keys, with the rules the
agent applies before it reads a commit (lockstep agent --git-verify-keys,
--git-verify-secret, --git-verify-mode): OpenPGP signatures (git commit -S
with gpg) and SSH signatures (gpg.format=ssh) are accepted; mode HEAD
checks the commit, Tag the annotated tag REVISION names, TagAndHEAD both.
Run it in CI on a pull request's commits to fail early what the agent would
refuse. It prints the commit and the signing key, and exits 1 when the
signature does not verify.`,
		Example: `  lockstep verify-commit --keys .lockstep/trusted.pub
  lockstep verify-commit v1.4.0 --mode Tag --keys platform.asc`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rev := "HEAD"
			if len(args) == 1 {
				rev = args[0]
			}
			return f.run(cmd, rev)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.repo, "repo", ".", "`DIR` in the Git repository")
	fl.StringVar(&f.mode, "mode", string(git.VerifyHEAD), "what must be signed: HEAD, Tag or TagAndHEAD")
	fl.StringSliceVar(&f.keys, "keys", nil, "`FILE`s of trusted public keys: armored OpenPGP keys, or SSH keys in authorized_keys format (required)")
	return cmd
}

func (f *verifyCommitFlags) run(cmd *cobra.Command, rev string) error {
	mode, err := git.ParseVerifyMode(f.mode)
	if err != nil {
		return usageError(fmt.Errorf("--mode: %w", err))
	}
	if len(f.keys) == 0 {
		return usageError(errors.New("--keys is required: the trusted public keys"))
	}
	gf := gitFlags{verifyMode: f.mode, verifyKeys: f.keys}
	_, sources, err := gf.verification()
	if err != nil {
		return err
	}
	keys, err := git.ParseKeyRing(sources)
	if err != nil {
		return fmt.Errorf("--keys: %w", err)
	}
	commit, signers, err := git.VerifyRevision(f.repo, rev, git.Verification{Mode: mode, Keys: keys})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s (commit %s): verified; %s\n", rev, commit, signers)
	return nil
}
