"""The payoff table: a study priced before it trains. What every arm's training reward pays each
canonical completion (`canonical`: the honest ones and each checker's exploit) and the base policy's
own samples (`table`: the payoff table, and whether the exploit can pay at all), and which arms pay
everything alike and so train once (`identities`). It builds each arm's reward with `reward.pipeline`
and sits on the floor above it."""
