"""The CPU dispatch is pinned before torch loads, a user's own value wins, and runs record it."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from hackable_rl.core.numerics import DISPATCH_VARIABLE, dispatch_record

X86 = platform.machine().lower() in ("x86_64", "amd64")


def _python(code: str, **env: str) -> str:
    environment = {key: value for key, value in os.environ.items() if key != DISPATCH_VARIABLE}
    environment.update(env)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, check=True)
    return result.stdout.strip()


@pytest.mark.skipif(not X86, reason="the pin applies to x86-64 only")
def test_importing_the_package_pins_avx2_before_torch_loads():
    code = (
        "import sys, os, hackable_rl; "
        "print('torch' in sys.modules, os.environ.get('ATEN_CPU_CAPABILITY')); "
        "import torch; print(torch.backends.cpu.get_cpu_capability())"
    )
    before, capability = _python(code).splitlines()
    assert before == "False avx2"
    assert capability == "AVX2"


def test_a_value_the_user_set_wins():
    code = "import os, hackable_rl; print(os.environ['ATEN_CPU_CAPABILITY'])"
    assert _python(code, ATEN_CPU_CAPABILITY="default") == "default"


def test_too_late_to_pin_leaves_the_environment_alone():
    code = "import torch, os, hackable_rl; print(os.environ.get('ATEN_CPU_CAPABILITY'))"
    assert _python(code) == "None"


def test_the_record_names_the_variable_and_the_kernels_in_use():
    import torch  # noqa: F401  (the record reads torch's capability once it is loaded)

    record = dispatch_record()
    assert record[DISPATCH_VARIABLE] == os.environ.get(DISPATCH_VARIABLE)
    assert record["torch_cpu_capability"]
    assert record["cpu_has_avx512f"] in ("yes", "no", None)


@pytest.mark.skipif(not X86, reason="the pin applies to x86-64 only")
def test_numpys_blas_kernels_are_pinned_before_numpy_loads_and_a_users_value_wins():
    code = "import os, hackable_rl; print(os.environ.get('OPENBLAS_CORETYPE'))"
    environment = {key: value for key, value in os.environ.items() if key != "OPENBLAS_CORETYPE"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, check=True)
    assert result.stdout.strip() == "Haswell"
    assert _python(code, OPENBLAS_CORETYPE="Zen") == "Zen"
    late = "import numpy, os, hackable_rl; print(os.environ.get('OPENBLAS_CORETYPE'))"
    result = subprocess.run([sys.executable, "-c", late], capture_output=True, text=True, env=environment, check=True)
    assert result.stdout.strip() == "None"
