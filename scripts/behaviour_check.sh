#!/usr/bin/env bash
# Behaviour unchanged by a move of code: the same short tiny-policy pipeline (prepare, a 60-step warm start,
# 6 GRPO steps against a flipped verifier with the alarm on) under the code of BASE_COMMIT and of this
# checkout, every file of the two compared; then every committed study's report recomputed by this
# checkout's code in a copy of its folder and compared with the committed files. About 5 minutes alone.
#
#   scripts/behaviour_check.sh BASE_COMMIT [WORK_DIR]
#
# Prints the files that differ. Expected differences between two codes are for a person to explain: a run
# folder's paths and times (run.json's base_model, trainer_state.json, training_args.bin, step_time), a
# config hash where the schema gained a key, and any column a change removed on purpose.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
base="${1:?usage: scripts/behaviour_check.sh BASE_COMMIT [WORK_DIR]}"
work="${2:-$(mktemp -d -t behaviour-check-XXXX)}"
python="$root/.venv/bin/python"
[ -x "$python" ] || { echo "error: $root/.venv: not installed; run \`make install\` first" >&2; exit 2; }
git -C "$root" worktree add --detach "$work/base-code" "$base" >/dev/null || exit 2
trap 'git -C "$root" worktree remove --force "$work/base-code"' EXIT

sets=(warmstart.steps=60 warmstart.eval_size=20 trainer.max_steps=6 trainer.save_steps=3 "trainer.permanent_steps=[6]"
      evaluation.max_prompts=16 evaluation.n=2 "evaluation.k=[1,2]" tracking.enabled=false torch_threads=1
      corruption.rate=0.3)
for side in base head; do
  src="$root/src"; [ "$side" = base ] && src="$work/base-code/src"
  mkdir -p "$work/$side" && cp "$work/base-code/params.yaml" "$work/$side/params.yaml"
  for stage in prepare warmstart train; do
    (cd "$work/$side" && PYTHONPATH="$src" OMP_NUM_THREADS=1 "$python" -m hackable_rl "$stage" \
      $(printf -- '--set %s ' "${sets[@]}") >"$stage.log" 2>&1) || { echo "$side $stage failed: $work/$side/$stage.log"; exit 1; }
  done
done
differ="$(diff -rq "$work/base" "$work/head" | grep -v '\.log differ' | sed -E "s|^Files $work/base/([^ ]*) and .*|  \1|")"
echo "tiny pipeline, $base against this checkout; files that differ (in $work/base and $work/head):"
echo "${differ:-  none}"

for study in "$root"/pipelines/*/; do
  name="$(basename "$study")"
  cmd="$("$python" -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))['stages'].get('report', {}).get('cmd', ''))" \
        "$study/dvc.yaml")"
  [ -n "$cmd" ] && grep -q "^  report:" "$study/dvc.lock" 2>/dev/null || continue  # a study not yet reported
  cp -r "$study" "$work/report-$name"
  (cd "$work/report-$name" && PATH="$root/.venv/bin:$PATH" bash -c "$cmd" >"$work/report-$name.log" 2>&1) \
    || { echo "$name: report failed: $work/report-$name.log"; continue; }
  changed="$(diff -rq "$work/report-$name" "$study" | grep -v '^Only in ')"
  echo "$name's report: ${changed:-every file identical}"
done
