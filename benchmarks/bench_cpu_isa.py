"""Benchmark how the CPU's code paths change a demo build: the same seeded build, on the same
machine and the same two threads, with torch's kernels and its BLAS held to different instruction
sets, and what each setting costs.

A demo model is trained on the user's CPU. torch picks its ATen kernels by the CPU's vector
instructions (``ATEN_CPU_CAPABILITY`` caps them: ``default`` is the portable build, ``avx2``,
``avx512``), and MKL, its BLAS, picks its own code path (``MKL_CBWR`` fixes it; ``COMPATIBLE`` is
MKL's path for results that agree across processors), as does oneDNN (``ONEDNN_MAX_CPU_ISA``). Each
is read once, when torch loads, so every setting runs in a fresh worker process. For each one the
worker:

- builds the tiny kit's causal LM from seed 0: randomly initialised (``init``), then with the kit's
  60 pre-training steps (``pretrained``), and hashes both;
- trains the act classifier of the suite's greedy-decoding test (``tiny-acts-llm``, 300 steps at
  3e-3) on one shared tiny kit, built once with the machine's own settings, times it and hashes the
  adapter.

Equal hashes mean bit-identical weights. Writes a JSON report; benchmarks/README.md quotes it.

Usage::

    python benchmarks/bench_cpu_isa.py [--output benchmarks/results/cpu_isa.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: (name, environment) of each setting, the machine's own first.
SETTINGS: list[tuple[str, dict[str, str]]] = [
    ("native", {}),
    ("aten-default", {"ATEN_CPU_CAPABILITY": "default"}),
    ("aten-avx2", {"ATEN_CPU_CAPABILITY": "avx2"}),
    ("aten-avx2+mkl-avx2", {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}),
    ("aten-default+mkl-avx2", {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "AVX2"}),
    ("aten-avx2+onednn-avx2+mkl-compatible",
     {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "COMPATIBLE"}),
    ("aten-default+onednn-avx2+mkl-compatible",
     {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "COMPATIBLE"}),
]
KNOBS = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def worker(scratch: Path) -> None:
    """Run one setting's builds (its environment is already this process's) and print a JSON line."""
    import torch

    from simhub.demo.tiny import KIT_PRETRAIN_STEPS, build_causal_lm
    from simhub.models.cpu import pinned_threads
    from simhub.provision import DEMO_BUILD_THREADS, resolve_recipe
    from simhub.training import load_recipe, train

    row: dict = {"capability": torch.backends.cpu.get_cpu_capability()}
    with pinned_threads(DEMO_BUILD_THREADS):
        for name, steps in (("init", 0), ("pretrained", KIT_PRETRAIN_STEPS)):
            out = build_causal_lm(scratch / name, pretrain_steps=steps)
            row[f"tiny_lm_{name}_sha256"] = _sha(out / "model.safetensors")
        recipe = resolve_recipe(load_recipe("tiny-acts-llm", ["max_steps=300", "eval_steps=300", "learning_rate=3e-3"]))
        start = time.perf_counter()
        train(recipe, scratch / "acts-llm")
        row["acts_llm_train_s"] = round(time.perf_counter() - start, 1)
    row["acts_llm_adapter_sha256"] = _sha(scratch / "acts-llm" / "adapter_model.safetensors")
    print(json.dumps(row), flush=True)


def _cpu() -> dict:
    info = {"machine": platform.machine(), "model": "", "flags": []}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return info
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and not info["model"]:
            info["model"] = value.strip()
        if key.strip() == "flags" and not info["flags"]:
            info["flags"] = sorted(f for f in value.split() if f.startswith(("avx2", "avx512f", "amx", "fma")))
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default="benchmarks/results/cpu_isa.json")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(Path(args.worker))
        return

    import torch

    from simhub.provision import DEMO_BUILD_THREADS

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = {k: v for k, v in os.environ.items() if k not in KNOBS}
        home = Path(tmp) / "home"
        subprocess.run([sys.executable, "-c", "from simhub.provision import build_tiny_kit; build_tiny_kit()"],
                       env={**base, "SIMHUB_HOME": str(home)}, check=True)  # the shared kit, native settings
        for name, extra in SETTINGS:
            scratch = Path(tmp) / name
            done = subprocess.run([sys.executable, __file__, "--worker", str(scratch)], capture_output=True, text=True,
                                  env={**base, **extra, "SIMHUB_HOME": str(home), "TRANSFORMERS_VERBOSITY": "error"})
            if done.returncode != 0:
                raise SystemExit(f"setting {name} failed:\n{done.stderr[-2000:]}")
            row = {"setting": name, "env": extra, **json.loads(done.stdout.strip().splitlines()[-1])}
            print(json.dumps(row), flush=True)
            rows.append(row)
    native = rows[0]["acts_llm_train_s"]
    for row in rows:
        row["train_time_vs_native"] = round(row["acts_llm_train_s"] / native, 2)
    adapters = {r["acts_llm_adapter_sha256"] for r in rows}
    report = {
        "benchmark": "the same seeded demo builds under capped CPU code paths",
        "cpu": _cpu(),
        "torch": torch.__version__,
        "threads": DEMO_BUILD_THREADS,
        "rows": rows,
        "distinct_adapters": len(adapters),
        "distinct_inits": len({r["tiny_lm_init_sha256"] for r in rows}),
        "distinct_pretrained": len({r["tiny_lm_pretrained_sha256"] for r in rows}),
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("distinct_adapters", "distinct_inits", "distinct_pretrained")}))


if __name__ == "__main__":
    main()
