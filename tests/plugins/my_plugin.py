"""An external reward and objective, loaded through the registry as `my_plugin:...`."""


def shouting_reward(completions, **columns):
    """1.0 for a completion written in capitals (a toy external reward)."""
    return [1.0 if text.isupper() else 0.0 for text in completions]


class DoubleCorrectness:
    """An external objective: twice the correctness reward."""

    def __init__(self, config):
        self.config = config

    def reward_names(self):
        return ["correctness_reward"]

    def combine(self, components, **columns):
        return [2.0 * value for value in components["correctness_reward"]]
