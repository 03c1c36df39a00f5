#!/usr/bin/env bash
# The demo (`make demo`). Today it shows the foundation: lockstep builds every
# example package into an image, checking each as Crossplane's parser would.
# The agent issue extends it into the full loop (control plane, registry,
# Git repository, agent, upgrade).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "== building the example packages with lockstep xpkg build"
for dir in examples/packages/*/v*/; do
  dir=${dir%/}
  ./bin/lockstep xpkg build "$dir" -o "$out/$(basename "$(dirname "$dir")")-$(basename "$dir").xpkg"
done
echo "== demo done: the later stages (lock, render, apply, agent) are not built yet"
