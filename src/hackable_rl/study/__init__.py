"""Running a study: its cells (`cells`, read from the study file that `config.study` parses), each
condition run end to end (`condition`), its arms priced before they train (`arms`, over the payoff
table of `hackable_rl.payoff`), the base policy's honest samples (`honest`), exploit shares
(`exploits`) and a real-model study's budget (`budget`). What a condition writes is
`study_records/`'s, below this package; the reports read it from above.
"""
