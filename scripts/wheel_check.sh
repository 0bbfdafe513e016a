#!/usr/bin/env bash
# Install as users do: build the sdist and, from it, the wheel (`python -m build`), install the wheel into a
# fresh venv with no checkout on the path, and run what a user runs first, from a folder outside the
# checkout: `hackable-rl --help`, the package data and version checks, `hackable-rl validate` on the shipped
# example config, a warm start of its tiny policy, and the TRL example (taken from the sdist) for one step.
#
#   bash scripts/wheel_check.sh            # CI runs it (.ci/run); 5-10 minutes on 2 cores, most of it pip
#
# torch is installed first as `torch==2.13.0` (the CPU wheel; an unpinned torch resolves to a CUDA build of
# several GB), then the wheel with torch held at that version. WHEEL_CHECK_KEEP=1 keeps the scratch folder.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d "${TMPDIR:-/tmp}/wheel-check.XXXXXX")"
[[ "${WHEEL_CHECK_KEEP:-0}" == 1 ]] || trap 'rm -rf "$work"' EXIT
step() { printf '\n== wheel check: %s\n' "$*"; }
quietly() { "$@" >"$work/step.log" 2>&1 || { tail -40 "$work/step.log"; exit 1; }; }  # its log on failure only

step "build the sdist, then the wheel from it"
"$python" -m venv "$work/build-env"
quietly "$work/build-env/bin/pip" install build
quietly "$work/build-env/bin/python" -m build --outdir "$work/dist" "$repo"
sdist=("$work"/dist/hackable_rl-*.tar.gz)
wheel=("$work"/dist/hackable_rl-*.whl)
ls -l "${sdist[0]}" "${wheel[0]}"

step "install the wheel into a fresh venv"
"$python" -m venv "$work/venv"
quietly "$work/venv/bin/pip" install "torch==2.13.0"
echo "torch==2.13.0" >"$work/torch.txt"
quietly "$work/venv/bin/pip" install "${wheel[0]}" --constraint "$work/torch.txt"
export PATH="$work/venv/bin:$PATH"
mkdir "$work/user" && cd "$work/user"
unset PYTHONPATH
export MLFLOW_TRACKING_URI="sqlite:///$work/user/mlflow.db" OMP_NUM_THREADS=1

step "hackable-rl --help"
hackable-rl --help >/dev/null && hackable-rl --version

step "package data, version and where the package comes from"
python - "$repo" <<'EOF'
import sys
from importlib.metadata import version
from importlib.resources import files
from pathlib import Path

import hackable_rl

repo = Path(sys.argv[1]).resolve()
where = Path(hackable_rl.__file__).resolve()
assert repo not in where.parents, f"hackable_rl imported from the checkout: {where}"
assert version("hackable-rl") == hackable_rl.__version__, (version("hackable-rl"), hackable_rl.__version__)
example = files("hackable_rl.config") / "params-tiny.yaml"
assert example.is_file(), f"package data missing: {example}"
print(f"hackable-rl {hackable_rl.__version__} from {where.parent}; example config {example}")
EOF

step "hackable-rl validate on the shipped example config"
cp "$(python -c 'from importlib.resources import files; print(files("hackable_rl.config") / "params-tiny.yaml")')" params.yaml
hackable-rl validate >/dev/null

step "prepare and warm-start its tiny policy"
hackable-rl prepare --set tracking.enabled=false
hackable-rl warmstart --set tracking.enabled=false

step "the TRL example from the sdist, one step"
tar -xzf "${sdist[0]}" --wildcards '*/examples/own_trl_script.py' --strip-components=2
python own_trl_script.py --model cache/models/tiny-arith-w0 --data cache/datasets/arith/train.jsonl --steps 1 \
  --out "$work/user/grpo-out" | tee example.log
grep -q "right in the last step" example.log

step "passed"
