"""Run-level studies: evaluating a training run (judge + its own training verifier on the same
samples), evaluating many runs, and the study summary tables.

This package, not `evaluation/`, brings the training verifier in: `evaluation/` holds only the
independent judge and the metrics and never imports the corruption code.
"""
