"""``simhub annotate``: label dialogues with an LLM; ``simhub annotate agree``: compare two annotators.

``annotate`` is a command with options and also the parent of ``agree``: the subcommand is
optional, so ``simhub annotate --data ...`` runs the labeller and ``simhub annotate agree A B``
the comparison, and the options the labeller needs are checked in its handler.
"""

from __future__ import annotations

import argparse
import json
import sys

from simhub.errors import ConfigError

_USAGE = """simhub annotate --data DIR_OR_FILE --output DIR --model NAME [--labels LIST] [--base-url URL]
                       [--concurrency N] [--batch-api] [--dry-run] [options]
       simhub annotate agree DIR_A DIR_B [--annotator-a NAME] [--annotator-b NAME]"""

_DESCRIPTION = """Label canonical dialogue JSONL with an LLM behind any OpenAI-compatible endpoint (OpenAI, a local
vLLM server) and write {split}_{model}.csv in the layout of the released annotations, which
'simhub data convert-eedi --annotations DIR --annotator NAME' reads back. The key is read from
SIMHUB_ANNOTATOR_API_KEY, else OPENAI_API_KEY, and sent only to api.openai.com; a local server
(localhost) gets none, and any other host needs --api-key-env VAR. Answers are
cached under $SIMHUB_HOME/cache/annotation: a killed run resumes where it stopped and an identical
rerun sends nothing. 'simhub annotate agree A B' compares two annotators on the same dialogues."""


class _Progress:
    """A tqdm bar per labelling stage, fed by the labeller's ``(stage, done, total)`` reports."""

    def __init__(self) -> None:
        self.bars: dict[str, object] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        from simhub.progress import tqdm

        bar = self.bars.get(stage)
        if bar is None:
            bar = self.bars[stage] = tqdm(total=total, desc=f"annotate {stage}", unit="req", dynamic_ncols=True)
        bar.total = total
        bar.update(done - bar.n)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()


def _annotate(args: argparse.Namespace) -> int:
    missing = [flag for flag, value in (("--data", args.data), ("--model", args.model)) if not value]
    if not args.dry_run and not args.output:
        missing.append("--output")
    if missing:
        raise ConfigError(f"annotate needs {', '.join(missing)} (or use: simhub annotate agree DIR_A DIR_B)",
                          field=missing[0].removeprefix("--"))
    from simhub.cli.common import check_output

    check_output(args.output, folder=True)
    from simhub.annotation import (
        CHARS_PER_TOKEN,
        AnnotationSettings,
        annotate_splits,
        annotator_endpoint_settings,
        annotator_lm,
        load_inputs,
        plan_annotation,
    )

    settings = AnnotationSettings(
        labels=args.labels, temperature=args.temperature, max_tokens=args.max_tokens, json_mode=not args.no_json_mode,
        batch=args.batch_api, poll_interval_s=args.poll_interval, max_wait_s=args.max_wait, hash_ids=args.hash_ids,
    )
    endpoint = annotator_endpoint_settings(
        args.base_url, api_key_env=args.api_key_env, concurrency=args.concurrency, cache_dir=args.cache_dir,
        max_retries=args.max_retries, timeout_s=args.timeout,
    )
    splits = load_inputs(args.data)
    if args.dry_run:
        plan = plan_annotation(splits, args.model, settings)
        print(f"dry run, nothing sent: {sum(plan.dialogues.values())} dialogues "
              f"({', '.join(f'{s} {n}' for s, n in plan.dialogues.items())})")
        for label, count in plan.requests.items():
            tokens = -(-plan.prompt_chars[label] // CHARS_PER_TOKEN)
            print(f"  {label:<12} {count:>7} requests  ~{tokens:,} prompt tokens")
        cap = f"; answers at most {plan.max_answer_tokens:,} tokens" if plan.max_answer_tokens is not None else ""
        print(f"total: {plan.total_requests} requests, ~{plan.prompt_tokens:,} prompt tokens (characters / "
              f"{CHARS_PER_TOKEN}){cap}; cached answers will not be sent again")
        return 0
    from simhub.cli.common import job_executor

    executor = job_executor(args, None)  # (annotate reads no profile: the flags alone)
    lm = annotator_lm(args.model, endpoint, settings)
    progress = None if args.quiet else _Progress()
    try:
        report = annotate_splits(splits, args.output, lm, settings, annotator=args.annotator, progress=progress,
                                 executor=executor)
    finally:
        executor.close()
        lm.client.close()  # the shared client's connections (it reopens them if asked again)
        if progress is not None:
            progress.close()
    for split, path in report.files.items():
        failed = report.failed(split)
        note = f" (failed: {', '.join(f'{k} {v}' for k, v in failed.items())})" if failed else ""
        print(f"{split}: {report.dialogues[split]} dialogues -> {path}{note}")
    print(f"requests: {report.requests} ({report.cache_hits} answered from the cache, {report.calls} HTTP calls)")
    if report.failed_total:
        causes = "; ".join(f"{cause} {n}" for cause, n in report.causes.most_common())
        print(f"failed labels: {report.failed_total} dialogue label(s)" + (f" (request failures: {causes})" if causes
              else "") + "; rerun the same command to retry them", file=sys.stderr)
        if not report.made and not report.waiting:
            from simhub.cli.common import EXIT_FAILED

            print("simhub: error: no label was made", file=sys.stderr)
            return EXIT_FAILED
    return 0


def _agree(args: argparse.Namespace) -> int:
    from simhub.annotation import compare_annotations, format_agreement

    result = compare_annotations(args.dir_a, args.dir_b, annotator_a=args.annotator_a, annotator_b=args.annotator_b)
    print(json.dumps(result, indent=2) if args.json else format_agreement(result))
    return 0


def register(sub) -> None:
    p = sub.add_parser("annotate", help="label dialogues with an LLM in the released annotation layout "
                                        "('annotate agree' compares two annotators)",
                       usage=_USAGE, description=_DESCRIPTION)
    p.add_argument("--data", help="canonical JSONL: a folder with train/val/test.jsonl, or one file X.jsonl (split X)")
    p.add_argument("--output", help="folder for the {split}_{model}.csv files")
    p.add_argument("--model", help="the labeller's model name, as the endpoint knows it (the paper used gpt-4.1)")
    p.add_argument("--labels", default="questions,acts,correctness,kcs,ocean,freeform",
                   help="comma-separated labels to make (default: all of questions, acts, correctness, kcs, ocean, "
                        "freeform); labels not made are kept from an existing output file")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint ending in /v1 (default: https://api.openai.com/v1; "
                                      "e.g. http://localhost:8000/v1 for vLLM)")
    p.add_argument("--api-key-env", default="auto",
                   help="the one variable whose value is sent as the key; 'none' sends no key; default 'auto': "
                        "SIMHUB_ANNOTATOR_API_KEY, then OPENAI_API_KEY, for api.openai.com only, no key for a "
                        "localhost server, and any other host must name its variable")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight at once (default: 8)")
    p.add_argument("--batch-api", action="store_true", help="send through the OpenAI Batch API (half price, up to 24h)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the number of requests and an estimate of the prompt tokens; send nothing")
    p.add_argument("--cache-dir", help="answer cache (default: $SIMHUB_HOME/cache/annotation)")
    p.add_argument("--annotator", help="annotator name in the output file names (default: the model name)")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default: 0, as the paper)")
    p.add_argument("--max-tokens", type=int, default=4000, help="answer token limit (default: 4000, as the paper)")
    p.add_argument("--no-json-mode", action="store_true",
                   help="do not ask for response_format json_object (for endpoints that reject it)")
    p.add_argument("--max-retries", type=int, default=5, help="retries per request with backoff (default: 5)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per attempt (default: 120)")
    p.add_argument("--poll-interval", type=float, default=30.0, help="Batch API: seconds between polls (default: 30)")
    p.add_argument("--max-wait", type=float, help="Batch API: stop waiting after this many seconds (rerun to collect)")
    p.add_argument("--hash-ids", action="store_true",
                   help="derive keys for dialogue ids that are not '<QuestionId>-<InterventionId>' (the original id "
                        "goes to a dialogue_id column)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    from simhub.cli.common import add_executor

    add_executor(p, "chunks of live requests")
    p.set_defaults(handler=_annotate)

    inner = p.add_subparsers(dest="annotate_command", title="subcommand", metavar="agree DIR_A DIR_B",
                             parser_class=type(p))
    a = inner.add_parser("agree", prog="simhub annotate agree", help="agreement of two annotators on the same dialogues (Cohen's kappa, Jaccard)",
                         description="Compare two folders of annotation files in the released layout on the "
                                     "dialogues they share: Cohen's kappa for acts and correctness, mean Jaccard "
                                     "for KCs, agreement on the correct option and on OCEAN levels.")
    a.add_argument("dir_a", help="folder with the first annotator's {split}_{name}.csv files")
    a.add_argument("dir_b", help="folder with the second annotator's files")
    a.add_argument("--annotator-a", help="annotator name in DIR_A's file names (default: the folder's only one)")
    a.add_argument("--annotator-b", help="annotator name in DIR_B's file names (default: the folder's only one)")
    a.add_argument("--json", action="store_true", help="print JSON instead of a table")
    a.set_defaults(handler=_agree)
