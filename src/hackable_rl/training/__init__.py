"""GRPO training through TRL: the reward function, generation records, checkpoints, resume."""
