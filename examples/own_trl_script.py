"""A plain TRL GRPO script using hackable-rl's parts (docs/own-trl-script.md): a noisy training
verifier as the reward, every step's completions as MLflow traces with the judge's and the verifier's
verdicts as assessments, and the hacking alarm. Public names of `hackable_rl.trl_parts` only.

    python examples/own_trl_script.py --model MODEL_FOLDER --data train.jsonl [--steps 4]

`--data`: JSONL rows with a `prompt` and a `reference` answer (any `id` column keys the noise).
MLflow: MLFLOW_TRACKING_URI, or MLflow's local default.
"""

# hackable_rl first: it pins PyTorch's CPU kernels before torch loads (the same numbers on every x86 CPU)
import argparse  # noqa: I001

from hackable_rl.trl_parts import GenerationTraceCallback, HackingAlarmCallback, judge, verifier_reward
from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--data", required=True)
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--out", default="grpo-out")
# 64 tokens hold a worked solution and its \boxed{} answer; 16 cut every one short (none could be right)
parser.add_argument("--max-completion-length", type=int, default=64)
options = parser.parse_args()

tokenizer = AutoTokenizer.from_pretrained(options.model, padding_side="left")
model = AutoModelForCausalLM.from_pretrained(options.model)
dataset = load_dataset("json", data_files=options.data, split="train").select_columns(["prompt", "reference"])

args = GRPOConfig(
    output_dir=options.out,
    max_steps=options.steps,
    per_device_train_batch_size=8,
    num_generations=4,  # GRPO's group size: set here only, the reward reads it from args
    max_completion_length=options.max_completion_length,
    logging_steps=1,
    report_to="mlflow",
    use_cpu=True,
    save_strategy="no",
)
# One clean member whose verdicts are flipped 40% of the time, as Lv et al. study it.
reward = verifier_reward(members=["clean"], channel="flip", rate=0.4, args=args)
trainer = GRPOTrainer(
    model=model,
    reward_funcs=[reward],
    args=args,
    train_dataset=dataset,
    processing_class=tokenizer,
    callbacks=[GenerationTraceCallback(reward), HackingAlarmCallback(reward, votes=1)],
)
trainer.train()

# The independent judge on the last step's completions.
rows = [{"completion": record.completion, "reference": record.reference} for record in reward.last_step_records()]
right = sum(row["correct"] is True for row in judge(rows))
print(f"{right} of {len(rows)} right in the last step (step {reward.last_step})")
