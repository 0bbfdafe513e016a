"""A plain TRL GRPO script using hackable-rl's parts (docs/own-trl-script.md): a noisy training
verifier as the reward, every step's completions as an MLflow trace, and the hacking alarm.

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
options = parser.parse_args()

tokenizer = AutoTokenizer.from_pretrained(options.model, padding_side="left")
model = AutoModelForCausalLM.from_pretrained(options.model)
dataset = load_dataset("json", data_files=options.data, split="train").select_columns(["prompt", "reference"])

# One clean member whose verdicts are flipped 40% of the time, as Lv et al. study it.
reward = verifier_reward(members=["clean"], channel="flip", rate=0.4, num_generations=4)
args = GRPOConfig(
    output_dir=options.out,
    max_steps=options.steps,
    per_device_train_batch_size=8,
    num_generations=4,
    max_completion_length=16,
    logging_steps=1,
    report_to="mlflow",
    use_cpu=True,
    save_strategy="no",
)
trainer = GRPOTrainer(
    model=model,
    reward_funcs=[reward],
    args=args,
    train_dataset=dataset,
    processing_class=tokenizer,
    callbacks=[GenerationTraceCallback(reward), HackingAlarmCallback(reward, votes=1)],
)
trainer.train()

# The independent judge on a few of the last step's completions.
rows = [{"completion": r.completion, "reference": r.reference} for r in reward.buffer.records_for(options.steps)]
print(sum(row["correct"] is True for row in judge(rows)), "of", len(rows), "right in the last step")
