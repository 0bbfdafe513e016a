"""Above the extensions: the reward pipeline TRL sees (`pipeline`), its objectives and records, the
payoff table, and resolving a loaded config's names to extensions (`extensions`)."""
