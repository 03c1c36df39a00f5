package main

import (
	"errors"
	"fmt"
	"path"

	"github.com/spf13/cobra"

	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
	"github.com/lockstep-gitops/lockstep/cmd/internal/update"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/sources/git"
)

// newRollbackCommand returns `lockstep rollback`.
func newRollbackCommand() *cobra.Command {
	var (
		dir, to, author string
		noCommit        bool
	)
	cmd := &cobra.Command{
		Use:   "rollback",
		Short: "Propose a commit that restores the previous lock's pins",
		Long: `rollback restores --dir (its declarations and lockstep.lock) in the Git
worktree that holds it to what it was before the last commit that changed
lockstep.lock, or to --to, and commits that on the current branch: one
commit to review, push and merge, as any change. Applying it (lockstep
apply, or the agent once it is merged) installs the previous pins; a
revision Crossplane kept (revisionHistoryLimit) becomes Active again and,
with a warm package cache, nothing is pulled.

The restored directory must hold a lock that matches its declarations (as
lock --check says): otherwise nothing is committed and the worktree is put
back. rollback refuses a worktree with uncommitted changes, and writes no
commit with --no-commit (the files are restored for review).`,
		Example: `  lockstep rollback --dir clusters/prod
  lockstep rollback --dir clusters/prod --to 3f2c1e0 --no-commit
  git push origin HEAD:rollback-prod   # then open a pull request`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sig, err := update.ParseSignature(author)
			if err != nil {
				return usageError(fmt.Errorf("--author: %w", err))
			}
			repo, head, err := openClean(dir)
			if err != nil {
				return err
			}
			var target *git.LocalCommit
			if to != "" {
				target, err = repo.Resolve(to)
			} else {
				target, err = repo.BeforeLastChange(head, path.Join(repo.Dir, lockfile.FileName))
			}
			if err != nil {
				return err
			}
			if err := repo.RestoreDir(repo.Dir, target); err != nil {
				return err
			}
			s, err := snapshot.LoadDir(cmd.Context(), dir, snapshot.AllowStale())
			if err == nil && len(s.Problems) > 0 {
				err = fmt.Errorf("%s at %s is stale: %s", lockfile.FileName, target.Short(), s.Problems[0])
			}
			if err != nil {
				restoreErr := repo.RestoreDir(repo.Dir, head)
				return errors.Join(fmt.Errorf("the directory at %s does not hold a usable lock; the worktree is put back: %w", target.Short(), err), restoreErr)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "restored %s to commit %s (%s): %d packages, Crossplane %s\n", repo.Dir, target.Short(), target.Subject(), len(s.Lock.Packages), s.Lock.CrossplaneVersion)
			if noCommit {
				fmt.Fprintln(out, "not committed (--no-commit): review with git diff, then commit")
				return nil
			}
			c, err := repo.CommitAll(fmt.Sprintf("Roll back %s to %s\n\nRestore the declarations and %s of commit %s (%s), written by lockstep rollback.",
				repo.Dir, target.Short(), lockfile.FileName, target.Hash(), target.Subject()), sig)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "committed %s: push it and open a pull request, or apply it\n", c.Short())
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&dir, "dir", ".", "directory of declarations and lockstep.lock, inside a Git worktree")
	fl.StringVar(&to, "to", "", "`COMMIT` to restore the directory to (default: the one before the last change of its lockstep.lock)")
	fl.StringVar(&author, "author", "lockstep <lockstep@noreply.invalid>", "commit author, \"Name <email>\"")
	fl.BoolVar(&noCommit, "no-commit", false, "restore the files but do not commit")
	return cmd
}

// openClean opens the Git worktree holding dir, refuses it when it has
// uncommitted changes (the commands that commit there, rollback and
// promote, commit all of it), and returns it with its HEAD commit.
func openClean(dir string) (*git.LocalRepo, *git.LocalCommit, error) {
	repo, err := git.OpenLocal(dir)
	if err != nil {
		return nil, nil, err
	}
	if clean, first, err := repo.Clean(); err != nil {
		return nil, nil, err
	} else if !clean {
		return nil, nil, fmt.Errorf("the worktree %s has uncommitted changes (%s): commit or stash them first", repo.Root, first)
	}
	head, err := repo.HeadCommit()
	if err != nil {
		return nil, nil, err
	}
	return repo, head, nil
}
