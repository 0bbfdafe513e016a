"""Pricing a study before it trains: what every arm's training reward pays each canonical completion
and the base policy's own samples (`payoff`: the payoff table, and whether the exploit can pay at
all), and which arms pay everything alike and so train once (`identities`). It builds each arm's
reward with `scoring` and sits on the floor above it."""
