#!/usr/bin/env bash
# Equal results with and without prompt-prefix sharing (docs/results.md, "Speed"). Sharing a group's
# prompt in the prefill and the loss (`trainer.share_prompt_prefix`, `evaluation.share_prompt_prefix`)
# keeps every generation record of training byte for byte but not the final weights (the prefix's
# gradient is summed in another order), so its outcomes are compared statistically.
#
# The J sweep's clean reference is the main job's clean GRPO (its learning regime, three clean
# members) on replicates with their own warm starts. This trains and evaluates it again with sharing
# off, from the same warm starts, and compares it with the sweep's own reference runs (sharing on),
# paired by prompt and replicate, with the equivalence test inside +-0.02 pass@1 (TOST; base cancels,
# so the difference of the two clean gains is the difference of their pass@1).
#
#   bash benchmarks/equal_results.sh [SEEDS]    # default 0,1,2,3; after the sweep's reference@<seed>
#
# Two conditions at a time, one thread each. Writes benchmarks/equal_results/unshared-s<seed>/
# (condition.json, prompts.jsonl) and benchmarks/equal_results/compare.json; roughly 7 minutes per
# pair of seeds on a 2-core AMD EPYC with avx512f (seen beside other work, not a clean timing).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export PATH="$root/.venv/bin:$PATH"
seeds="${1:-0,1,2,3}"
out="$root/benchmarks/equal_results"
cd "$root/pipelines/corruption_sweep"

unshared() {
  hackable-rl condition --method baseline --config params.yaml --study study.yaml --cell clean \
    --set seed="$1" --set trainer.share_prompt_prefix=false --set evaluation.share_prompt_prefix=false \
    --set tracking.run_name="unshared-clean-s$1" --out "$out/unshared-s$1" > "$out/unshared-s$1.log" 2>&1
}

mkdir -p "$out"
IFS=, read -ra list <<< "$seeds"
for ((i = 0; i < ${#list[@]}; i += 2)); do
  unshared "${list[i]}" &
  if ((i + 1 < ${#list[@]})); then unshared "${list[i + 1]}" & fi
  wait
done
shared=() unshared_dirs=()
for seed in "${list[@]}"; do
  shared+=("results/reference/baseline-clean-s$seed")
  unshared_dirs+=("$out/unshared-s$seed")
done
hackable-rl compare --policy "shared=$(IFS=,; echo "${shared[*]}")" \
  --policy "unshared=$(IFS=,; echo "${unshared_dirs[*]}")" \
  --pair unshared:shared --margin 0.02 --out "$out/compare.json"
