#!/usr/bin/env bash
# lockstep-pr.sh: the review step of a lockstep repository for any CI system.
#
# It checks that lockstep.lock matches the declarations (lockstep lock
# --check), writes `lockstep diff` as markdown and JSON, posts the markdown
# on the GitHub pull request when it is told which one, and exits 2 when a
# change is breaking (or, with LOCKSTEP_FAIL_ON=any, 3 when anything
# changes). Run it from a clone with the base branch fetched.
#
# Environment:
#   LOCKSTEP_DIR          declarations directory (default .)
#   LOCKSTEP_BASE         base Git revision (default: the merge base of HEAD
#                         and the default branch, which lockstep finds)
#   LOCKSTEP_HEAD         head Git revision (default: the working tree)
#   LOCKSTEP_OUT          output directory (default lockstep-diff)
#   LOCKSTEP_FAIL_ON      breaking (default), any or none
#   LOCKSTEP_FULL_REPORT  where CI publishes LOCKSTEP_OUT/diff.json, named at
#                         the end of the comment (for example an artifact URL)
#   LOCKSTEP_FLAGS        extra flags for lockstep diff, for example
#                         "--registry-config /secrets/config.json"
#   GITHUB_TOKEN, GITHUB_REPOSITORY (owner/name), PR_NUMBER
#                         post the markdown on that pull request, editing
#                         lockstep's earlier comment; needs curl and jq.
#                         GITHUB_API_URL defaults to https://api.github.com.
set -euo pipefail

dir=${LOCKSTEP_DIR:-.}
out=${LOCKSTEP_OUT:-lockstep-diff}
mkdir -p "$out"

# 1. The lock must match the declarations: no network, exit 4 when stale.
lockstep lock --check --dir "$dir"

# 2. The diff. Its stdout is the report; errors go to stderr.
args=(--dir "$dir" --format markdown --json-output "$out/diff.json" --fail-on "${LOCKSTEP_FAIL_ON:-breaking}")
if [ -n "${LOCKSTEP_BASE:-}" ]; then args+=(--base "$LOCKSTEP_BASE"); fi
if [ -n "${LOCKSTEP_HEAD:-}" ]; then args+=(--head "$LOCKSTEP_HEAD"); fi
if [ -n "${LOCKSTEP_FULL_REPORT:-}" ]; then args+=(--full-report "$LOCKSTEP_FULL_REPORT"); fi
# shellcheck disable=SC2206 # LOCKSTEP_FLAGS is split into words on purpose
if [ -n "${LOCKSTEP_FLAGS:-}" ]; then args+=(${LOCKSTEP_FLAGS}); fi

status=0
lockstep diff "${args[@]}" > "$out/diff.md" || status=$?
# Exit 2 is the gate on breaking changes, exit 3 the gate of --fail-on any
# on other changes; then a report was written. Otherwise it is an error
# and there is nothing to post.
if [ "$status" -ne 0 ] && [ "$status" -ne 2 ] && [ "$status" -ne 3 ]; then
	echo "lockstep diff failed (exit $status)" >&2
	exit "$status"
fi
echo "wrote $out/diff.md and $out/diff.json"

# 3. Post or update the pull-request comment.
if [ -n "${GITHUB_TOKEN:-}" ] && [ -n "${GITHUB_REPOSITORY:-}" ] && [ -n "${PR_NUMBER:-}" ]; then
	api=${GITHUB_API_URL:-https://api.github.com}
	auth=(-H "Authorization: Bearer $GITHUB_TOKEN" -H "Accept: application/vnd.github+json")
	body=$(jq -Rs '{body: .}' < "$out/diff.md")
	id=$(curl -fsSL "${auth[@]}" "$api/repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/comments?per_page=100" |
		jq -r '[.[] | select(.body | startswith("<!-- lockstep-diff -->"))] | last | .id // empty')
	if [ -n "$id" ]; then
		curl -fsSL -X PATCH "${auth[@]}" -d "$body" "$api/repos/$GITHUB_REPOSITORY/issues/comments/$id" > /dev/null
	else
		curl -fsSL -X POST "${auth[@]}" -d "$body" "$api/repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/comments" > /dev/null
	fi
	echo "posted the diff on $GITHUB_REPOSITORY#$PR_NUMBER"
fi

exit "$status"
