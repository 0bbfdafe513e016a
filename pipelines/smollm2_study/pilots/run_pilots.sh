#!/usr/bin/env bash
# The validation pilots that chose the study's training settings (README.md, "What chose each setting"),
# on replicate 0's warm start, never on the test split. Run from pipelines/smollm2_study after
# `hackable-rl prepare` and `hackable-rl warmstart --set seed=0`; two lanes of one thread each.
#   base-validation     the warm start on validation: the base the pilots gain over, and the samples
#                       whose wrong answers choose the blind spot (benchmarks/bench_error_patterns.py)
#   top8 / all30        GRPO + LoRA against the clean member, 20 steps: adapters on the top 8 blocks
#                       (the study's speed setting) against all 30 (today's), the same lr 2e-4
# Decision rule, fixed before the pilots ran: keep the top 8 blocks unless all 30 gain more than 0.05
# validation pass@1 over them.
set -euo pipefail
VALIDATION=(--set evaluation.split=validation --set seed=0)
PILOT=(--set trainer.max_steps=20 --set trainer.save_steps=10)
{  # lane 1: the base, then the study's setting
  hackable-rl condition --method base --study study.yaml --cell blind "${VALIDATION[@]}" \
    --set tracking.run_name=pilot-base-validation --out pilots/base-validation-s0
  hackable-rl condition --method baseline --study study.yaml --cell clean "${VALIDATION[@]}" "${PILOT[@]}" \
    --set tracking.run_name=pilot-top8 --out pilots/top8-s0
} &
# lane 2: today's adapters
hackable-rl condition --method baseline --study study.yaml --cell clean "${VALIDATION[@]}" "${PILOT[@]}" \
  --set lora.top_layers=null --set tracking.run_name=pilot-all30 --out pilots/all30-s0
wait
