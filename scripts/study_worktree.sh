#!/usr/bin/env bash
# Run a study's outdated stages through `hackable-rl lanes` in a git worktree at this checkout's HEAD, so
# that work on the checkout never changes the code under a running study. The worktree uses this
# checkout's .venv with the worktree's own sources first on the path. In the background; the log and the
# worktree's path are printed. Copy each finished condition's folder (and dvc.lock) back and commit it.
# Every worktree shares this checkout's DVC cache (.dvc/cache), so a later worktree (a later commit of the
# study) restores what an earlier one made, warm starts included, instead of making it again.
#
#   scripts/study_worktree.sh pipelines/smollm2_learning 'warmstart@0' 'pilot@lr1e-3-all30-0'
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
study="${1:?usage: scripts/study_worktree.sh PIPELINE_FOLDER STAGE_GLOB...}"; shift
[ -f "$root/$study/dvc.yaml" ] || { echo "error: $study: no dvc.yaml there" >&2; exit 2; }
[ -x "$root/.venv/bin/hackable-rl" ] || { echo "error: $root/.venv: not installed; run \`make install\` first" >&2; exit 2; }
commit="$(git -C "$root" rev-parse --short HEAD)"
tree="$(dirname "$root")/$(basename "$study")-$commit"
[ -d "$tree" ] || git -C "$root" worktree add --detach "$tree" "$commit" >/dev/null
mkdir -p "$root/.dvc/cache"
[ -e "$tree/.dvc/cache" ] || ln -s "$root/.dvc/cache" "$tree/.dvc/cache"
log="$tree/$study/lanes.log"
cd "$tree/$study"
PYTHONPATH="$tree/src" PATH="$root/.venv/bin:$PATH" nohup hackable-rl lanes "$@" >"$log" 2>&1 &
echo "lanes running in $tree/$study (commit $commit), pid $!, log $log"
