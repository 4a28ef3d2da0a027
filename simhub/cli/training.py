"""``simhub train``, ``simhub dpo``, ``simhub publish`` and ``simhub pull``.

    simhub train tiny-student-sft --output-dir runs/tiny-student-sft
    simhub train kt-8b --output-dir runs/kt-8b --set epochs=1 --resume
    accelerate launch --config_file training/accelerate/single_gpu.yaml -m simhub \\
        train student-sft-8b --output-dir runs/student-sft-8b
    simhub dpo tiny-student-dpo --output-dir runs/tiny-student-dpo
    simhub grpo tiny-student-grpo --output-dir runs/tiny-student-grpo
    simhub publish runs/student-sft-8b --repo-id my-org/simhub-student-sft-8b --private [--results RUN_DIR]
    simhub pull my-org/simhub-student-sft-8b --output-dir models/student-sft-8b
"""

from __future__ import annotations

import argparse
import json

from simhub.cli.common import add_executor, check_output
from simhub.errors import ConfigError


def _recipe(args: argparse.Namespace):
    from simhub.provision import resolve_recipe
    from simhub.training import load_recipe

    return resolve_recipe(load_recipe(args.recipe, args.set or []))


def _train(args: argparse.Namespace) -> int:
    from simhub.training import load_recipe, train

    kind = load_recipe(args.recipe, args.set or []).kind
    if kind == "student-dpo":
        return _dpo(args)
    if kind == "student-grpo":
        return _grpo(args)
    check_output(args.output_dir, folder=True, field="output_dir")
    train(_recipe(args), args.output_dir, resume=args.resume)
    return 0


def _parsed(args: argparse.Namespace, kind: str, command: str):
    """The recipe as written (nothing built), after checking its kind and the output folder."""
    from simhub.training import load_recipe

    recipe = load_recipe(args.recipe, args.set or [])
    if recipe.kind != kind:
        raise ConfigError(f"{args.recipe}: kind is {recipe.kind!r}; simhub {command} needs a {kind} recipe",
                          field="kind")
    check_output(args.output_dir, folder=True, field="output_dir")
    return recipe


def _dpo(args: argparse.Namespace) -> int:
    from contextlib import closing

    from simhub.cli.common import job_executor
    from simhub.config import load_profile
    from simhub.provision import dpo_reward_profile
    from simhub.training.dpo import run_dpo

    parsed = _parsed(args, "student-dpo", "dpo")
    # the executor (checked before any model is built) takes its defaults from the reward profile
    with closing(job_executor(args, load_profile(parsed.dpo.scoring_profile))) as executor:
        recipe = _recipe(args)  # builds a provisioned base model: after every check
        run_dpo(recipe, args.output_dir, dpo_reward_profile(recipe), resume=args.resume,
                until=getattr(args, "until", "train"), executor=executor)
    return 0


def _grpo(args: argparse.Namespace) -> int:
    from simhub.provision import grpo_reward_profile
    from simhub.training.grpo import run_grpo

    _parsed(args, "student-grpo", "grpo")
    recipe = _recipe(args)  # builds a provisioned base model and SFT adapter: after every check
    results = run_grpo(recipe, args.output_dir, grpo_reward_profile(recipe), resume=args.resume)
    print(json.dumps(results, indent=2, default=str))
    return 0


def _publish(args: argparse.Namespace) -> int:
    from simhub.hub import publish

    url = publish(args.model_dir, args.repo_id, private=args.private, revision=args.revision,
                  license=args.license, dry_run_dir=args.dry_run, results=args.results)
    print(url)
    return 0


def _pull(args: argparse.Namespace) -> int:
    from simhub.hub import pull

    path = pull(args.repo_id, revision=args.revision, output_dir=args.output_dir)
    print(json.dumps({"repo_id": args.repo_id, "path": str(path)}))
    return 0


def _recipe_args(p: argparse.ArgumentParser, examples: str = "tiny-student-sft, kt-8b") -> None:
    p.add_argument("recipe", metavar="RECIPE", help=f"a shipped recipe name (e.g. {examples}) or a YAML path")
    p.add_argument("--output-dir", required=True, help="folder for checkpoints, the adapter and results")
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a recipe key (typed; dotted keys for sections, e.g. dpo.beta=0.2); repeatable")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --output-dir")


def register(sub) -> None:
    p = sub.add_parser("train", help="fine-tune a student, tutor, classifier or KT model (LoRA)")
    _recipe_args(p)
    p.set_defaults(handler=_train)

    p = sub.add_parser("dpo", help="offline RL: generate, score, pair and DPO-train a student")
    _recipe_args(p, "tiny-student-dpo, student-dpo-8b")
    p.add_argument("--until", choices=["generate", "score", "pairs", "train"], default="train",
                   help="stop after this stage (default: run all)")
    add_executor(p, "candidate sampling and scoring batches")
    p.set_defaults(handler=_dpo)

    p = sub.add_parser("grpo", help="online RL: sample groups of student turns, reward them with the realism "
                                    "metrics, update (GRPO, beyond the paper)")
    _recipe_args(p, "tiny-student-grpo, student-grpo-8b")
    p.set_defaults(handler=_grpo)

    p = sub.add_parser("publish", help="upload a trained adapter with its model card to the Hub")
    p.add_argument("model_dir", metavar="MODEL_DIR", help="a simhub train or dpo output folder")
    p.add_argument("--repo-id", required=True, help="ORG/NAME on the Hub")
    p.add_argument("--private", action="store_true", help="create the repo private")
    p.add_argument("--revision", help="branch to push to (created if missing; default: main)")
    p.add_argument("--license", default="cc-by-nc-sa-4.0", help="licence of the weights (default: the data's)")
    p.add_argument("--results", action="append", metavar="RESULTS_JSON",
                   help="a simhub eval run's results.json (or run folder) whose numbers go into the card's "
                        "model-index; repeatable")
    p.add_argument("--dry-run", metavar="DIR", help="write the exact upload folder to DIR and upload nothing")
    p.set_defaults(handler=_publish)

    p = sub.add_parser("pull", help="download a published model into the Hugging Face cache or a folder")
    p.add_argument("repo_id", metavar="ORG/NAME", help="the model's Hub id")
    p.add_argument("--revision", help="branch, tag or commit")
    p.add_argument("--output-dir", help="copy the files into this folder (default: the HF cache)")
    p.set_defaults(handler=_pull)
