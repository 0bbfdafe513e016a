#!/usr/bin/env bash
# Run a study's outdated stages through `hackable-rl lanes` in a git worktree at this checkout's HEAD, so
# that work on the checkout never changes the code under a running study. The worktree uses this
# checkout's .venv with the worktree's own sources first on the path. In the background; the log and the
# worktree's path are printed. Bring each finished condition's folder and dvc.lock back with
# scripts/study_bring_back.py and commit them.
# Every worktree shares this checkout's DVC cache (.dvc/cache), so a later worktree (a later commit of the
# study) restores what an earlier one made, warm starts included, instead of making it again.
#
# STUDY_CODE=<commit> keeps a study that spans sessions on the code it started with: the worktree's code is
# that commit's and the study's folder is this checkout's (its params, dvc.lock and the results so far).
#
#   scripts/study_worktree.sh pipelines/smollm2_learning 'warmstart@0' 'pilot@lr1e-3-all30-0'
#   STUDY_CODE=3125c15 scripts/study_worktree.sh pipelines/smollm2_learning 'reference@2'
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
study="${1:?usage: scripts/study_worktree.sh PIPELINE_FOLDER STAGE_GLOB...}"; shift
[ -f "$root/$study/dvc.yaml" ] || { echo "error: $study: no dvc.yaml there" >&2; exit 2; }
[ -x "$root/.venv/bin/hackable-rl" ] || { echo "error: $root/.venv: not installed; run \`make install\` first" >&2; exit 2; }
commit="$(git -C "$root" rev-parse --short "${STUDY_CODE:-HEAD}")"
head="$(git -C "$root" rev-parse --short HEAD)"
tree="$(dirname "$root")/$(basename "$study")-$commit"
if [ ! -d "$tree" ]; then
  git -C "$root" worktree add --detach "$tree" "$commit" >/dev/null
  [ "$commit" = "$head" ] || git -C "$tree" checkout "$head" -- "$study"
else
  # a worktree left from an earlier run keeps its study folder (results not yet copied back included);
  # to start from this checkout's folder instead: copy back what it finished, then remove it
  echo "reusing $tree and its $study as it stands (to start from HEAD's: copy its results back, then" \
       "\`git worktree remove --force $tree\`)"
fi
mkdir -p "$root/.dvc/cache"
[ -e "$tree/.dvc/cache" ] || ln -s "$root/.dvc/cache" "$tree/.dvc/cache"
log="$tree/$study/lanes.log"
cd "$tree/$study"
# a fresh worktree holds no stage outputs (datasets, warm starts): restore what the shared cache has, so
# the stages dvc.lock records as done read as done and lanes runs only what is left
PATH="$root/.venv/bin:$PATH" dvc checkout --allow-missing >/dev/null 2>&1 || true
PYTHONPATH="$tree/src" PATH="$root/.venv/bin:$PATH" nohup hackable-rl lanes "$@" >"$log" 2>&1 &
echo "lanes running in $tree/$study (commit $commit), pid $!, log $log"
