"""Running a study: its cells (`cells`, read from the study file that `config.study` parses), each
condition run end to end (`condition`), its arms priced before they train (`arms`, over the payoff
table of `hackable_rl.payoff`), the base policy's honest samples (`honest`), exploit shares
(`exploits`), a real-model study's budget (`budget`), and its records: what a condition leaves on
disk (`records`: condition.json, exploits.jsonl, curve.csv, summary tables) and which of them an older
code left (`stale`). The study file's schema is `config.study`'s; the reports read the records from above.
"""
