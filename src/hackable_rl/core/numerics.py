"""The CPU instruction set PyTorch's kernels dispatch to, pinned before torch is imported.

PyTorch picks its CPU kernels by what the processor offers: AVX-512 where it has it, else AVX2.
The two round differently (another reduction order), so the same seed and steps give a different
warm start on an AVX-512 machine than on an AVX2 one, and every number downstream moves with it
(docs/reproducibility.md). Pinning the dispatch to AVX2, which every x86-64 CPU of the last decade
has, makes a fresh `dvc repro` give the same bytes on all of them.

- A value the user set (`ATEN_CPU_CAPABILITY` in the environment) wins.
- Only on x86-64: ARM CPUs have other kernels (NEON, SVE), and their numbers differ anyway.
- Not with an NVIDIA driver present: the policy runs on the GPU there, whose kernels this does not touch.
- It must run before the first `import torch`, which reads it once; `hackable_rl/__init__.py` calls it,
  so any `import hackable_rl...` sets it.

NumPy's BLAS (the OpenBLAS its wheel bundles) dispatches the same way: its dot products run
SkylakeX kernels on an AVX-512 CPU and round a correlation's last digits differently from the
Haswell ones an AVX2 CPU runs (measured: an evaluation's reward-correctness Pearson differed in the
15th digit). `OPENBLAS_CORETYPE=Haswell`, read once when NumPy loads, pins those kernels by the same
rules (the user's value wins; x86-64 only; before the first `import numpy`).

MKL_CBWR and ONEDNN_MAX_CPU_ISA were measured and changed nothing further for the ops used here.
"""

from __future__ import annotations

import functools
import os
import platform
import sys
from pathlib import Path

DISPATCH_VARIABLE = "ATEN_CPU_CAPABILITY"
PINNED_CAPABILITY = "avx2"
BLAS_VARIABLE = "OPENBLAS_CORETYPE"
PINNED_BLAS_CORE = "Haswell"
_NVIDIA_DRIVER = Path("/proc/driver/nvidia/version")


def pin_cpu_dispatch() -> str | None:
    """Sets ATEN_CPU_CAPABILITY=avx2 (and NumPy's BLAS kernels, `_pin_blas`) where it applies and torch
    is not loaded yet; returns the value in force (the user's own, the pinned one) or None where
    nothing is pinned."""
    _pin_blas()
    if DISPATCH_VARIABLE in os.environ:
        return os.environ[DISPATCH_VARIABLE]
    if not _on_x86() or _NVIDIA_DRIVER.exists():
        return None
    if "torch" in sys.modules:  # too late to take effect: leave the environment telling the truth
        return None
    os.environ[DISPATCH_VARIABLE] = PINNED_CAPABILITY
    return PINNED_CAPABILITY


def dispatch_mismatch() -> str | None:
    """One line saying what to change where torch loaded before `hackable_rl` could pin its kernels and
    this CPU's own differ from the pinned ones (an AVX-512 CPU), so a run's numbers would differ from
    `hackable-rl train`'s in their last digits; None where they are the same."""
    torch = sys.modules.get("torch")
    if torch is None or DISPATCH_VARIABLE in os.environ or not _on_x86() or _NVIDIA_DRIVER.exists():
        return None
    running = torch.backends.cpu.get_cpu_capability()
    if running.lower() == PINNED_CAPABILITY:
        return None
    return (f"torch was imported before hackable_rl, so its CPU kernels run {running} where hackable-rl pins "
            f"{PINNED_CAPABILITY.upper()} and the numbers can differ in their last digits; import hackable_rl "
            f"before torch, transformers and trl, or start Python with {DISPATCH_VARIABLE}={PINNED_CAPABILITY}")


def _pin_blas() -> None:
    """OPENBLAS_CORETYPE=Haswell on x86-64 before NumPy loads, unless the user set it: NumPy's dot
    products then run the AVX2 machines' kernels on every CPU."""
    if _on_x86() and BLAS_VARIABLE not in os.environ and "numpy" not in sys.modules:
        os.environ[BLAS_VARIABLE] = PINNED_BLAS_CORE


def _on_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def dispatch_record() -> dict[str, str | None]:
    """What the run's environment record says of the dispatch: the variable and, once torch is
    loaded, the capability its kernels actually use."""
    record: dict[str, str | None] = {DISPATCH_VARIABLE: os.environ.get(DISPATCH_VARIABLE),
                                     BLAS_VARIABLE: os.environ.get(BLAS_VARIABLE)}
    torch = sys.modules.get("torch")
    if torch is not None:
        record["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    record["cpu_has_avx512f"] = cpu_has_flag("avx512f")
    return record


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> str:
    """/proc/cpuinfo, read once per process (it does not change while one runs); empty where absent."""
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def cpu_has_flag(flag: str) -> str | None:
    """'yes' or 'no' from /proc/cpuinfo's flags; None where the file does not say (not Linux)."""
    for line in _cpuinfo().splitlines():
        if line.startswith("flags"):
            return "yes" if flag in line.split() else "no"
    return None


DISPATCH_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
"""The CPU flags that decide which kernels torch and oneDNN can run."""

MACHINE_KEY = "machine"
"""The key of the machine record in every result file a model-running stage writes."""


def machine_record() -> dict[str, object]:
    """Which machine wrote a result file: the CPU model, its dispatch-relevant flags, the dispatch
    torch actually uses (with the pinning variables), torch's thread count and version. A file that
    carries it says on which CPU its numbers were made; two machines' files agree byte for byte but
    for this record where the dispatch is pinned (docs/reproducibility.md)."""
    torch = sys.modules.get("torch")
    return {
        "cpu": _cpu_model(),
        "flags": {flag: cpu_has_flag(flag) for flag in DISPATCH_FLAGS},
        "dispatch": dispatch_record(),
        "torch_threads": torch.get_num_threads() if torch is not None else None,
        "torch": getattr(torch, "__version__", None),
    }


def _cpu_model() -> str:
    """/proc/cpuinfo's model name with its family and model numbers (a virtual machine often names
    only the vendor's line: the numbers tell its generations apart); else what the platform says."""
    fields: dict[str, str] = {}
    for line in _cpuinfo().splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    if "model name" not in fields:
        return platform.processor() or platform.machine()
    return f"{fields['model name']} (family {fields.get('cpu family', '?')}, model {fields.get('model', '?')})"
