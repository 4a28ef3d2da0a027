"""``simhub human-eval``: the paper's human evaluation (Tables 2–3), in two steps.

    simhub human-eval tasks runs/dpo runs/zero-shot runs/oracle --data test.jsonl --output human/ \\
        --raters r1,r2,r3 --overlap 4
    # raters fill human/ratings/r1.csv ... reading human/sheets/r1.md ...
    simhub human-eval report human/ human/ratings/*.csv
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from simhub.cli.common import check_output, read_dialogues

_TASKS_DESCRIPTION = """Draw student turns for people to rate, as the paper's human evaluation: with a seeded draw
(--seed), --dialogues dialogues that have --turns consecutive student turns from turn --start-turn on,
each simulated by every run. Writes OUTPUT/items.jsonl (what raters see: problem, history, the real
turn and the runs' simulated turns, blinded and shuffled), a readable sheet and a blank ratings CSV per
rater (sheets/RATER.md, ratings/RATER.csv) and key.json (which run wrote which candidate, the metrics'
values and the real turns' LLM labels; keep it from the raters). Without runs, the real turns alone
are rated (human-label and human-human agreement only). See docs/human-eval.md."""

_REPORT_DESCRIPTION = """Read the raters' CSV files (columns item, rater, act, correctness, same_error, linguistic;
one row per rated turn per rater) against a tasks folder and report the human-evaluated scores of
each run (the paper's Table 2) and the agreements of its Table 3: Cohen's kappa between the raters
and the acts, correctness and errors metrics (na a category of its own), Pearson's r between the
similarity ratings and cosine and ROUGE-L, kappa with the LLM labels of the real turns, and between
two raters on the turns both rated. A bad cell exits 2 naming the file, row and column."""


def _raters(text: str) -> tuple[str, ...]:
    return tuple(r.strip() for r in text.split(",") if r.strip())


def _data_path(args: argparse.Namespace, runs) -> str:
    from simhub.errors import ConfigError

    if args.data:
        return args.data
    recorded = [run.data.path for _, run in runs if run.data.path]
    for path in recorded:
        if Path(path).is_file():
            return path
    if not runs:
        raise ConfigError("--data: without runs, name the dialogue file whose real turns are rated", field="data")
    where = f" (the runs name {recorded[0]}, which is not there from here)" if recorded else ""
    raise ConfigError(f"--data: name the dialogue file the runs were evaluated on{where}", field="data")


def _tasks(args: argparse.Namespace) -> int:
    from simhub.evaluation.human_eval import (
        TaskOptions,
        check_new_tasks_folder,
        check_task_options,
        load_task_runs,
        write_tasks,
    )

    options = TaskOptions(dialogues=args.dialogues, turns_per_dialogue=args.turns, start_turn=args.start_turn,
                          seed=args.seed, raters=_raters(args.raters), overlap=args.overlap)
    check_task_options(options)
    check_output(args.output, folder=True)
    check_new_tasks_folder(args.output)
    runs = load_task_runs(args.runs)
    data = _data_path(args, runs)
    dialogues = read_dialogues(data)
    summary = write_tasks(dialogues, runs, args.output, options, data_path=data)
    shortfall = (f" (only {summary['dialogues']} of the {args.dialogues} asked for have {args.turns} such turns)"
                 if summary["dialogues"] < args.dialogues else "")
    print(f"{summary['groups']} turns from {summary['dialogues']} dialogues{shortfall}, "
          f"{len(summary['runs'])} simulated candidate(s) each ({', '.join(summary['runs']) or 'real turns only'}); "
          f"{summary['items']} items to rate")
    print("turns per rater: " + ", ".join(f"{r} {n}" for r, n in summary["per_rater"].items()))
    print(f"-> {args.output} (give raters sheets/ and ratings/; keep key.json)")
    return 0


def _report(args: argparse.Namespace) -> int:
    from simhub.evaluation.human_eval import (
        REPORT_FILE,
        format_report,
        human_eval_report,
        load_key,
        read_ratings,
        write_report,
    )

    key = load_key(args.tasks)
    output = args.output or str(Path(args.tasks) / REPORT_FILE)
    check_output(output, folder=False)
    ratings, unrated = read_ratings(args.ratings, key)
    report = human_eval_report(key, ratings, unrated=unrated)
    path = write_report(report, output)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    if not args.json:
        print(f"-> {path}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("human-eval", help="the paper's human evaluation: rating tasks, then agreement of the "
                                          "ratings with the metrics (Tables 2-3)")
    inner = p.add_subparsers(dest="human_eval_command", required=True, metavar="{tasks,report}",
                             parser_class=type(p))

    t = inner.add_parser("tasks", help="write the rating tasks: sampled student turns, real and simulated, with "
                                       "context", description=_TASKS_DESCRIPTION)
    t.add_argument("runs", nargs="*", metavar="RUN_DIR",
                   help="simhub eval run directories over the same data, one blinded candidate each; NAME=RUN_DIR "
                        "names one (default: its simulator); none: rate the real turns only")
    t.add_argument("--data", help="the dialogues (JSONL) the runs were evaluated on (default: the file the runs "
                                  "record, when it is there); required without runs")
    t.add_argument("--output", required=True, help="new folder for the tasks (refused if it holds tasks already)")
    t.add_argument("--dialogues", type=int, default=38, help="dialogues to draw (default 38, as the paper)")
    t.add_argument("--turns", type=int, default=5,
                   help="consecutive student turns rated per dialogue (default 5, as the paper)")
    t.add_argument("--start-turn", type=int, default=5,
                   help="first turn index (of all turns, tutor's included) a rated student turn may have "
                        "(default 5: the paper rates from the fifth turn on, for context)")
    t.add_argument("--raters", default="rater1",
                   help="comma-separated rater ids; each gets a sheet and a ratings file (default: rater1)")
    t.add_argument("--overlap", type=int, default=0,
                   help="drawn dialogues rated by every rater, for human-human agreement (default 0; the paper: 4, "
                        "i.e. 20 turns)")
    t.add_argument("--seed", type=int, default=221,
                   help="seed of the draw of dialogues and of the candidates' order (default 221, the reference's)")
    t.set_defaults(handler=_tasks)

    r = inner.add_parser("report", help="agreement of human ratings with the metrics, the LLM labels and each other",
                         description=_REPORT_DESCRIPTION)
    r.add_argument("tasks", metavar="TASKS_DIR", help="the folder simhub human-eval tasks wrote (its key.json)")
    r.add_argument("ratings", nargs="+", metavar="RATINGS_CSV",
                   help="filled-in ratings files (e.g. TASKS_DIR/ratings/*.csv); rows with every rating blank are "
                        "skipped")
    r.add_argument("--output", help="JSON file to write (default: TASKS_DIR/report.json)")
    r.add_argument("--json", action="store_true", help="print the JSON report instead of the tables")
    r.set_defaults(handler=_report)
