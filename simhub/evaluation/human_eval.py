"""The paper's human evaluation (its §3.4 and Tables 2–3): rating tasks for people, and how well the
people agree with the metrics, with the LLM annotation and with each other (docs/human-eval.md).

Two steps, each a function:

* :func:`write_tasks` draws student turns of the dialogues (seeded) and writes what raters see,
  one *group* per drawn turn: the question, the real history, the real student turn and, blinded
  and shuffled, each ``simhub eval`` run's simulated turn. A separate ``key.json`` (not for raters)
  records which run wrote which candidate, the metrics' values for it and the real turn's LLM labels.
* :func:`human_eval_report` reads the raters' CSV files (one row per rated turn per rater) against
  that key and computes the human-evaluated scores of each run (Table 2) and the agreements of
  Table 3: Cohen's κ (Pearson's r for linguistic similarity) human–metric, human–label, human–human.

Every statistic is computed as the reference analysis computes it. A human outcome is derived from
one rater's labels of a simulated turn *and of the real turn*: acts is 1 when the two acts are the
same; correctness is ``na`` when the rater called the real turn na, else 1 when the two correctness
labels are the same; errors is ``na`` unless the rater called the real turn incorrect, else 1 when
the simulated turn is incorrect with the same error; linguistic is (rating − 1) / 4. The metric's
outcome for κ is its value, with a null that means "does not apply" (real turn na, not incorrect,
or without a correctness label for errors) as the category ``na``; a null for any other reason (a
failed judge call, a missing act label) leaves the pair out. A turn rated by two raters counts
once per rater in Table 2 and in the human–metric and human–label agreements.

κ and r are computed here with the standard formulas (numpy only): κ = (p_o − p_e) / (1 − p_e) over
the categories either side used, as scikit-learn's ``cohen_kappa_score``; r is Pearson's
product-moment correlation, as SciPy's ``pearsonr``. Both are None where undefined (nothing to
compare, a single category on both sides, a constant series).
"""

from __future__ import annotations

import csv
import json
import math
import os
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simhub.config import CandidateRules
from simhub.errors import ConfigError, DataError, did_you_mean
from simhub.evaluation.paper import TABLE2_HUMAN, TABLE3
from simhub.evaluation.rundir import Run, ScoredTurn, load_run
from simhub.evaluation.runs import sha256_of
from simhub.metrics.agreement import cohen_kappa
from simhub.metrics.judge import NO_LABEL, NOT_INCORRECT, REAL_NA
from simhub.prompts.annotation import ACT_DEFINITIONS
from simhub.schema import ACTS, CORRECTNESS_LABELS, Dialogue, atomic_write_bytes
from simhub.scoring import apply_candidate_rules

__all__ = [
    "COLUMNS",
    "KEY_FILE",
    "NA",
    "Rating",
    "TaskOptions",
    "check_new_tasks_folder",
    "check_task_options",
    "cohen_kappa",
    "format_report",
    "human_eval_report",
    "load_key",
    "load_task_runs",
    "pearson",
    "read_ratings",
    "write_report",
    "write_tasks",
]

TASKS_KIND = "simhub-human-eval-tasks"
REPORT_KIND = "simhub-human-eval-report"
SCHEMA_VERSION = 1
#: The files of a tasks folder.
KEY_FILE = "key.json"
ITEMS_FILE = "items.jsonl"
SHEETS_DIR = "sheets"
RATINGS_DIR = "ratings"
REPORT_FILE = "report.json"
#: The columns of a ratings CSV file, in the order the templates write them.
COLUMNS: tuple[str, ...] = ("item", "rater", "act", "correctness", "same_error", "linguistic")
#: The category of an outcome that does not apply (κ counts it as a category of its own).
NA = "na"
#: The rating columns (a row with all of them blank is an unrated template row).
_RATING_COLUMNS = COLUMNS[2:]
_RATER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SLOTS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#: Answers accepted for correctness (the paper's interface asked Yes / No / N/A) and same_error.
_CORRECTNESS = {"correct": "correct", "yes": "correct", "incorrect": "incorrect", "no": "incorrect",
                "na": "na", "n/a": "na", "n.a.": "na", "none": "na"}
_YES_NO = {"yes": True, "y": True, "true": True, "1": True, "no": False, "n": False, "false": False, "0": False}
_ACT_NAMES = {a.lower(): a for a in ACTS}
#: Null reasons that mean the metric does not apply (its outcome is the category na, not a gap).
_NA_REASONS = {"correctness": {REAL_NA}, "errors": {REAL_NA, NOT_INCORRECT, NO_LABEL}}


# ------------------------------------------------------------------------------------ statistics


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's r of two paired series; None with fewer than two pairs or a constant series."""
    if len(x) != len(y):
        raise ValueError("the two series differ in length")
    if len(x) < 2:
        return None
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    dx, dy = xa - xa.mean(), ya - ya.mean()
    denominator = math.sqrt(float(np.dot(dx, dx)) * float(np.dot(dy, dy)))
    if denominator == 0.0:
        return None
    return max(-1.0, min(1.0, float(np.dot(dx, dy)) / denominator))


# ------------------------------------------------------------------------------------ task files


@dataclass(frozen=True, slots=True)
class TaskOptions:
    """How the rated turns are drawn and shared out.

    ``dialogues`` dialogues are drawn with ``random.Random(seed)`` among those that have
    ``turns_per_dialogue`` consecutive student turns from turn index ``start_turn`` on, each simulated
    by every run; their first ``overlap`` are rated by every rater (for human–human agreement), the
    others are dealt to the raters in turn. The paper: 38 dialogues, 5 turns, from turn 5, 3 raters,
    20 turns (4 dialogues) rated twice.
    """

    dialogues: int = 38
    turns_per_dialogue: int = 5
    start_turn: int = 5
    seed: int = 221
    raters: tuple[str, ...] = ("rater1",)
    overlap: int = 0


def check_task_options(options: TaskOptions) -> None:
    """Refuse options that cannot give a rating task (ConfigError naming the option)."""
    for name in ("dialogues", "turns_per_dialogue"):
        value = getattr(options, name)
        if value < 1:
            raise ConfigError(f"{name}: must be at least 1, got {value}", field=name)
    if options.start_turn < 0:
        raise ConfigError(f"start_turn: must be 0 or more, got {options.start_turn}", field="start_turn")
    if not options.raters:
        raise ConfigError("raters: name at least one rater", field="raters")
    for rater in options.raters:
        if not _RATER_ID.match(rater):
            raise ConfigError(f"raters: {rater!r} is not a usable rater id (letters, digits, '_', '.', '-'; it names "
                              "the rater's files)", field="raters")
    repeated = [r for r, n in Counter(options.raters).items() if n > 1]
    if repeated:
        raise ConfigError(f"raters: {repeated[0]!r} is named twice", field="raters")
    if options.overlap < 0:
        raise ConfigError(f"overlap: must be 0 or more, got {options.overlap}", field="overlap")
    if options.overlap and len(options.raters) < 2:
        raise ConfigError("overlap: dialogues rated by every rater need at least two raters", field="overlap")
    if options.overlap > options.dialogues:
        raise ConfigError(f"overlap: {options.overlap} shared dialogues, more than the {options.dialogues} drawn",
                          field="overlap")


def check_new_tasks_folder(output: str | os.PathLike[str]) -> None:
    """Refuse a folder that already holds rating tasks: rewriting them would blank filled-in ratings."""
    output = Path(output)
    if (output / KEY_FILE).exists():
        raise ConfigError(f"output: {output} already holds rating tasks ({KEY_FILE}); write new tasks to another "
                          "folder (its ratings files would be overwritten)", field="output")


def load_task_runs(specs: Sequence[str]) -> list[tuple[str, Run]]:
    """The runs to rate, each ``DIR`` or ``NAME=DIR`` (default name: the run's simulator), checked:
    names unique (at most 26 runs, one candidate letter each), all over the same data file."""
    if len(specs) > len(_SLOTS):
        raise ConfigError(f"runs: at most {len(_SLOTS)} runs can be rated side by side, got {len(specs)}", field="runs")
    runs: list[tuple[str, Run]] = []
    for spec in specs:
        name, path = None, spec
        if "=" in spec and not Path(spec).is_dir():
            name, _, path = spec.partition("=")
            if not name:
                raise ConfigError(f"runs: {spec!r} has an empty name before '='", field="runs")
        run = load_run(path)
        if not run.turns:
            raise DataError(f"{path}: no scored turns (a dialogue-level run cannot be rated turn by turn)",
                            file=str(path), field="runs")
        runs.append((name or run.simulator, run))
    names = Counter(name for name, _ in runs)
    for name, count in names.items():
        if count > 1:
            raise ConfigError(f"runs: {count} runs are named {name!r}; name them apart with NAME=DIR", field="runs")
    shas = {run.data.sha256 for _, run in runs if run.data.sha256}
    if len(shas) > 1:
        raise DataError("runs: the runs were evaluated on different data files (their data.sha256 differ)",
                        field="runs")
    return runs


def _auto_outcomes(turn: ScoredTurn) -> dict[str, Any]:
    """The metrics' outcomes for κ and r: a value, ``na`` where the metric does not apply, or None
    where the pair is left out (a failure, a missing label)."""
    reasons = turn.details.get("null_reasons")
    reasons = reasons if isinstance(reasons, Mapping) else {}
    out: dict[str, Any] = {}
    for name in ("acts", "correctness", "errors"):
        value = turn.scores.get(name)
        if value is not None:
            out[name] = round(value)
        else:
            out[name] = NA if reasons.get(name) in _NA_REASONS.get(name, ()) else None
    for name in ("cosine", "rouge_l"):
        out[name] = turn.scores.get(name)
    return out


def _candidate_rules(run: Run) -> CandidateRules:
    """The candidate rules the run scored under (what raters should see), else the reference's."""
    scoring = run.config.get("scoring")
    rules = scoring.get("candidates") if isinstance(scoring, Mapping) else None
    if isinstance(rules, Mapping):
        try:
            return CandidateRules(**{k: rules[k] for k in ("max_chars", "end_marker") if k in rules})
        except (TypeError, ValueError):
            pass
    return CandidateRules()


def _eligible(dialogue: Dialogue, runs: Sequence[Mapping[int, ScoredTurn]], options: TaskOptions) -> list[int]:
    """The dialogue's first ``turns_per_dialogue`` student turns from ``start_turn`` on, when there
    are that many and every run simulated each of them; else nothing."""
    turns = [i for i in dialogue.student_turn_indices() if i >= options.start_turn][: options.turns_per_dialogue]
    if len(turns) < options.turns_per_dialogue:
        return []
    for scored in runs:
        if any(scored.get(i) is None or scored[i].candidate is None for i in turns):
            return []
    return turns


def _check_run_against_data(name: str, run: Run, by_id: Mapping[str, Dialogue]) -> dict[str, dict[int, ScoredTurn]]:
    scored: dict[str, dict[int, ScoredTurn]] = {}
    for turn in run.turns:
        dialogue = by_id.get(turn.dialogue_id)
        if dialogue is None:
            raise DataError(f"run {name!r} ({run.path}): dialogue {turn.dialogue_id!r} is not in the dialogue file",
                            file=str(run.path), field="dialogue_id")
        if not 0 <= turn.turn_index < len(dialogue.turns) or dialogue.turns[turn.turn_index].role != "student":
            raise DataError(f"run {name!r} ({run.path}): turn {turn.turn_index} of dialogue {turn.dialogue_id!r} is "
                            "not a student turn of the dialogue file", file=str(run.path), field="turn_index")
        if turn.real is not None and turn.real != dialogue.turns[turn.turn_index].content:
            raise DataError(f"run {name!r} ({run.path}): the real turn {turn.turn_index} of dialogue "
                            f"{turn.dialogue_id!r} differs from the dialogue file's", file=str(run.path), field="real")
        scored.setdefault(turn.dialogue_id, {})[turn.turn_index] = turn
    return scored


def write_tasks(dialogues: Sequence[Dialogue], runs: Sequence[tuple[str, Run]], output: str | os.PathLike[str],
                options: TaskOptions, *, data_path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Draw the rated turns and write the tasks folder (docs/human-eval.md for its layout).

    ``runs`` (from :func:`load_task_runs`; none: the real turns alone, for the human–label and
    human–human agreements) must be over ``dialogues``. Refuses a folder that already holds tasks,
    so filled-in ratings are never overwritten. ``key.json`` is written last, so an interrupted
    write leaves no usable tasks folder behind. Returns a summary.
    """
    check_task_options(options)
    check_new_tasks_folder(output)
    output = Path(output)
    by_id = {d.id: d for d in dialogues}
    data_sha = sha256_of(data_path) if data_path is not None else None
    for name, run in runs:
        if data_sha and run.data.sha256 and run.data.sha256 != data_sha:
            raise DataError(f"run {name!r} ({run.path}) was evaluated on another data file than {data_path} "
                            "(data.sha256 differs)", file=str(run.path), field="data.sha256")
    scored = [_check_run_against_data(name, run, by_id) for name, run in runs]
    rules = [_candidate_rules(run) for _, run in runs]

    eligible = []
    for dialogue in dialogues:
        turns = _eligible(dialogue, [s.get(dialogue.id, {}) for s in scored], options)
        if turns:
            eligible.append((dialogue, turns))
    if not eligible:
        what = "simulated by every run" if runs else "in the dialogues"
        raise DataError(f"no dialogue has {options.turns_per_dialogue} consecutive student turns from turn "
                        f"{options.start_turn} on {what}", field="dialogues")
    rng = random.Random(options.seed)
    drawn = rng.sample(eligible, len(eligible))[: options.dialogues]
    if options.overlap > len(drawn):
        raise ConfigError(f"overlap: {options.overlap} shared dialogues, but only {len(drawn)} could be drawn",
                          field="overlap")

    raters = list(options.raters)
    width = max(3, len(str(len(drawn) * options.turns_per_dialogue)))
    groups, items = [], []
    assignment: dict[str, list[str]] = {r: [] for r in raters}
    for position, (dialogue, turns) in enumerate(drawn):
        who = raters if position < options.overlap else [raters[(position - options.overlap) % len(raters)]]
        for turn_index in turns:
            group = f"g{len(groups) + 1:0{width}d}"
            real = dialogue.turns[turn_index]
            order = rng.sample(range(len(runs)), len(runs))
            candidates, shown = [], []
            for slot, run_no in zip(_SLOTS, order, strict=False):
                name, run = runs[run_no]
                turn = scored[run_no][dialogue.id][turn_index]
                text, _ = apply_candidate_rules(turn.candidate or "", rules[run_no])
                item = f"{group}-{slot}"
                shown.append({"item": item, "text": text})
                candidates.append({"item": item, "run": name, "auto": _auto_outcomes(turn),
                                   "scores": dict(turn.scores),
                                   "null_reasons": dict(turn.details.get("null_reasons") or {})})
            items.append({
                "group": group, "dialogue_id": dialogue.id, "turn_index": turn_index,
                "question": dialogue.question.text, "correct_option": dialogue.question.correct_option,
                "solution": dialogue.question.solution,
                "context": [{"role": t.role, "content": t.content} for t in dialogue.turns[:turn_index]],
                "real": {"item": f"{group}-real", "text": real.content}, "candidates": shown,
            })
            groups.append({"group": group, "dialogue_id": dialogue.id, "turn_index": turn_index, "raters": who,
                           "real": {"item": f"{group}-real", "labels": {"act": real.act,
                                                                        "correctness": real.correctness}},
                           "candidates": candidates})
            for rater in who:
                assignment[rater].append(group)

    key = {
        "kind": TASKS_KIND, "schema_version": SCHEMA_VERSION,
        "options": {"dialogues": options.dialogues, "turns_per_dialogue": options.turns_per_dialogue,
                    "start_turn": options.start_turn, "seed": options.seed, "raters": raters,
                    "overlap": options.overlap},
        "data": {"path": str(data_path) if data_path is not None else None, "sha256": data_sha,
                 "dialogues": len(dialogues), "eligible": len(eligible), "drawn": len(drawn)},
        "runs": [{"name": name, "path": str(run.path), "simulator": run.simulator, "profile": run.profile}
                 for name, run in runs],
        "assignment": assignment,
        "groups": groups,
    }
    item_lines = {g["group"]: line for g, line in zip(groups, items, strict=True)}
    atomic_write_bytes(output / ITEMS_FILE, b"".join(_json_line(line) for line in items))
    for rater in raters:
        mine = [item_lines[g] for g in assignment[rater]]
        atomic_write_bytes(output / SHEETS_DIR / f"{rater}.md", _sheet(rater, mine).encode())
        atomic_write_bytes(output / RATINGS_DIR / f"{rater}.csv", _template(rater, mine).encode())
    atomic_write_bytes(output / KEY_FILE, json.dumps(key, indent=2, ensure_ascii=False).encode() + b"\n")
    return {"output": str(output), "groups": len(groups), "dialogues": len(drawn), "eligible": len(eligible),
            "runs": [name for name, _ in runs], "items": sum(1 + len(g["candidates"]) for g in groups),
            "per_rater": {r: len(gs) for r, gs in assignment.items()}}


def _json_line(record: Mapping[str, Any]) -> bytes:
    return json.dumps(record, ensure_ascii=False).encode() + b"\n"


def _template(rater: str, groups: Sequence[Mapping[str, Any]]) -> str:
    rows = [list(COLUMNS)]
    for g in groups:
        for item in [g["real"]["item"], *(c["item"] for c in g["candidates"])]:
            rows.append([item, rater, "", "", "", ""])
    return _csv_text(rows)


def _csv_text(rows: Sequence[Sequence[str]]) -> str:
    import io

    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in (text or "(empty)").splitlines() or ["(empty)"])


def _sheet(rater: str, groups: Sequence[Mapping[str, Any]]) -> str:
    acts = "\n".join(f"- **{act}**: {ACT_DEFINITIONS[act]}." for act in ACTS)
    lines = [
        f"# Rating sheet for {rater}",
        "",
        "Each section below is one moment of a real maths tutoring dialogue: the problem, the",
        "conversation so far, the student's real next turn and, when there are any, other candidate",
        "student turns written by computer models, in random order. Fill in one row of",
        f"`ratings/{rater}.csv` per turn (the `item` column names it).",
        "",
        "For every turn, real or candidate:",
        "",
        "- `act`: what the student does in this turn, one of:",
        "",
        acts,
        "",
        "- `correctness`: `correct` when the turn answers the maths the tutor just asked for correctly;",
        "  `incorrect` when it answers it wrongly or the student says they do not know; `na` for",
        "  anything else (the tutor asked no maths question, or the turn is purely conversational).",
        "",
        "For candidate turns only:",
        "",
        "- `same_error`: when you rated the candidate `incorrect` and the real turn `incorrect` too,",
        "  `yes` if the candidate makes the same mistake as the real turn (the same wrong answer, or an",
        "  equivalent one), else `no`. Leave it blank otherwise.",
        "- `linguistic`: leaving correctness aside, how close is the candidate's wording and structure",
        "  to the real turn's? 1 = nothing alike (other words, other kind of reply); 2 = slightly (a",
        "  shared number or word, expressed differently); 3 = moderately (the same kind of reply, worded",
        "  or built differently); 4 = highly (nearly the same wording and structure); 5 = practically",
        "  identical.",
        "",
        "Rate the real turn first, then each candidate; the candidates' order says nothing about where",
        "they come from.",
        "",
    ]
    for g in groups:
        answer = f" (correct answer: {g['correct_option']})" if g.get("correct_option") else ""
        lines += [f"## {g['group']}", "", f"**Problem**{answer}", "", _quote(g["question"]), ""]
        if g.get("solution"):
            lines += ["**Solution**", "", _quote(g["solution"]), ""]
        lines += ["**Dialogue so far**", ""]
        lines += [f"- *{t['role']}*: {' '.join((t['content'] or '').split()) or '(empty)'}" for t in g["context"]]
        if not g["context"]:
            lines.append("- (the student speaks first)")
        lines += ["", f"**Real student turn** `{g['real']['item']}`", "", _quote(g["real"]["text"]), ""]
        for c in g["candidates"]:
            lines += [f"**Candidate** `{c['item']}`", "", _quote(c["text"]), ""]
    return "\n".join(lines)


# -------------------------------------------------------------------------------------- ratings


@dataclass(frozen=True, slots=True)
class Rating:
    """One rater's judgement of one turn (a row of a ratings file)."""

    item: str
    rater: str
    act: str
    correctness: str
    same_error: bool | None
    linguistic: int | None
    file: str
    row: int


def load_key(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``key.json`` of a tasks folder, checked enough to be used."""
    folder = Path(folder)
    path = folder / KEY_FILE
    if not folder.is_dir():
        raise DataError(f"{folder}: not a folder (expected a simhub human-eval tasks folder)", file=str(folder))
    try:
        key = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: not found; is {folder} a simhub human-eval tasks folder?", file=str(path)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: cannot be read ({exc})", file=str(path)) from None
    if not isinstance(key, dict) or key.get("kind") != TASKS_KIND:
        raise DataError(f"{path}: not a simhub human-eval key (kind is not {TASKS_KIND!r})", file=str(path),
                        field="kind")
    groups = key.get("groups")
    if not isinstance(groups, list):
        raise DataError(f"{path}: groups: expected a list", file=str(path), field="groups")
    for n, g in enumerate(groups):
        if not (isinstance(g, dict) and isinstance(g.get("real"), dict) and isinstance(g.get("candidates"), list)
                and isinstance(g["real"].get("item"), str)
                and all(isinstance(c, dict) and isinstance(c.get("item"), str) and isinstance(c.get("auto"), dict)
                        for c in g["candidates"])):
            raise DataError(f"{path}: groups[{n}]: malformed (expected real.item and candidates[].item/auto)",
                            file=str(path), field=f"groups[{n}]")
    return key


def _items(key: Mapping[str, Any]) -> dict[str, tuple[Mapping[str, Any], Mapping[str, Any] | None]]:
    """Every item id -> (its group, its candidate entry or None for the real turn)."""
    out: dict[str, tuple[Mapping[str, Any], Mapping[str, Any] | None]] = {}
    for g in key["groups"]:
        out[g["real"]["item"]] = (g, None)
        for c in g["candidates"]:
            out[c["item"]] = (g, c)
    return out


def read_ratings(paths: Sequence[str | os.PathLike[str]], key: Mapping[str, Any]) -> tuple[list[Rating], int]:
    """The ratings of one or more CSV files (docs/human-eval.md), checked against the tasks' key.

    Returns the ratings and the number of unrated rows (template rows with every rating column
    blank). Any bad cell is a :class:`~simhub.errors.DataError` naming the file, the row (as a
    spreadsheet numbers it, the header being row 1) and the column.
    """
    items = _items(key)
    ratings: list[Rating] = []
    seen: dict[tuple[str, str], Rating] = {}
    unrated = 0
    for path in paths:
        path = Path(path)
        try:
            fh = path.open(newline="", encoding="utf-8-sig")
        except OSError as exc:
            raise DataError(f"{path}: cannot be read ({exc.strerror or exc})", file=str(path)) from None
        with fh:
            reader = csv.DictReader(fh)
            header = [(h or "").strip() for h in (reader.fieldnames or [])]
            reader.fieldnames = header
            missing = [c for c in COLUMNS if c not in header]
            if missing:
                raise DataError(f"{path}:1: missing column {missing[0]!r} (a ratings file has the columns "
                                f"{', '.join(COLUMNS)})", file=str(path), row=1, column=missing[0])
            for row_no, row in enumerate(reader, start=2):
                cells = {c: (row.get(c) or "").strip() for c in COLUMNS}
                if not any(cells.values()):
                    continue
                rating = _parse_row(path, row_no, cells, items)
                if rating is None:
                    unrated += 1
                    continue
                other = seen.get((rating.item, rating.rater))
                if other is not None:
                    raise DataError(f"{path}:{row_no}: item: rater {rating.rater!r} rated {rating.item!r} already "
                                    f"({other.file}, row {other.row})", file=str(path), row=row_no, column="item")
                seen[(rating.item, rating.rater)] = rating
                ratings.append(rating)
    for rating in ratings:
        group, candidate = items[rating.item]
        if candidate is None:
            continue
        real = seen.get((group["real"]["item"], rating.rater))
        where = {"file": rating.file, "row": rating.row}
        if real is None:
            raise DataError(f"{rating.file}:{rating.row}: item: rater {rating.rater!r} rated candidate {rating.item!r} "
                            f"but not its real turn {group['real']['item']!r}, which every candidate is compared with",
                            column="item", **where)
        if rating.correctness == "incorrect" and real.correctness == "incorrect" and rating.same_error is None:
            raise DataError(f"{rating.file}:{rating.row}: same_error: both this candidate and the real turn are rated "
                            "incorrect, so same_error needs yes or no", column="same_error", **where)
    if not ratings:
        raise DataError(f"{', '.join(str(p) for p in paths)}: no ratings (every row is blank)",
                        file=str(paths[0]) if paths else None)
    return ratings, unrated


def _parse_row(path: Path, row_no: int, cells: Mapping[str, str],
               items: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any] | None]]) -> Rating | None:
    def bad(column: str, message: str) -> DataError:
        return DataError(f"{path}:{row_no}: {column}: {message}", file=str(path), row=row_no, column=column)

    item = cells["item"]
    if not item:
        raise bad("item", "empty; name the item the row rates")
    if item not in items:
        raise bad("item", f"{item!r} is not an item of these tasks{did_you_mean(item, list(items))}")
    rater = cells["rater"]
    if not rater:
        raise bad("rater", "empty; name who rated the item")
    if not any(cells[c] for c in _RATING_COLUMNS):
        return None
    _, candidate = items[item]
    act = _ACT_NAMES.get(" ".join(cells["act"].lower().replace("_", " ").split()))
    if act is None:
        if not cells["act"]:
            raise bad("act", "empty; every rated turn needs its act")
        raise bad("act", f"{cells['act']!r} is not one of {', '.join(ACTS)}")
    correctness = _CORRECTNESS.get(cells["correctness"].lower())
    if correctness is None:
        if not cells["correctness"]:
            raise bad("correctness", "empty; every rated turn needs correct, incorrect or na")
        raise bad("correctness", f"{cells['correctness']!r} is not one of {', '.join(CORRECTNESS_LABELS)}")
    same_error: bool | None = None
    linguistic: int | None = None
    if candidate is None:
        for column in ("same_error", "linguistic"):
            if cells[column]:
                raise bad(column, f"{item!r} is the real turn; {column} is rated for candidates only (leave it blank)")
    else:
        if cells["same_error"]:
            same_error = _YES_NO.get(cells["same_error"].lower())
            if same_error is None:
                raise bad("same_error", f"{cells['same_error']!r} is not yes or no")
            if correctness != "incorrect":
                raise bad("same_error", f"the candidate is rated {correctness}; same_error applies only to a candidate "
                                        "rated incorrect (leave it blank)")
        text = cells["linguistic"]
        if not text:
            raise bad("linguistic", "empty; every candidate needs a similarity rating from 1 to 5")
        try:
            value = float(text)
        except ValueError:
            raise bad("linguistic", f"{text!r} is not a number from 1 to 5") from None
        if not value.is_integer() or not 1 <= value <= 5:
            raise bad("linguistic", f"{text} is out of range: a whole number from 1 to 5")
        linguistic = int(value)
    return Rating(item=item, rater=cells["rater"], act=act, correctness=correctness, same_error=same_error,
                  linguistic=linguistic, file=str(path), row=row_no)


# --------------------------------------------------------------------------------------- report


def _mean(values: Sequence[float]) -> dict[str, Any]:
    return {"mean": sum(values) / len(values) if values else None, "n": len(values)}


def _kappa(pairs: Sequence[tuple[Any, Any]]) -> dict[str, Any]:
    """κ with the raw share of equal outcomes (which stays defined where κ is not) and n."""
    return {"kappa": cohen_kappa([a for a, _ in pairs], [b for _, b in pairs]),
            "agreement": sum(a == b for a, b in pairs) / len(pairs) if pairs else None, "n": len(pairs)}


def _kappa_with_na(pairs: Sequence[tuple[Any, Any]]) -> dict[str, Any]:
    applicable = [(a, b) for a, b in pairs if a != NA and b != NA]
    return {**_kappa(pairs), "n_na": len(pairs) - len(applicable),
            "kappa_without_na": cohen_kappa([a for a, _ in applicable], [b for _, b in applicable]),
            "n_without_na": len(applicable)}


def _pearson(pairs: Sequence[tuple[float, float]]) -> dict[str, Any]:
    return {"pearson": pearson([a for a, _ in pairs], [b for _, b in pairs]), "n": len(pairs)}


def _human_outcomes(candidate: Rating, real: Rating) -> dict[str, Any]:
    """One rater's outcome for a simulated turn, against the same rater's labels of the real turn."""
    assert candidate.linguistic is not None
    return {
        "acts": int(candidate.act == real.act),
        "correctness": NA if real.correctness == "na" else int(candidate.correctness == real.correctness),
        "errors": NA if real.correctness != "incorrect"
        else int(candidate.correctness == "incorrect" and candidate.same_error is True),
        "linguistic": (candidate.linguistic - 1) / 4,
    }


def human_eval_report(key: Mapping[str, Any], ratings: Sequence[Rating], *, unrated: int = 0) -> dict[str, Any]:
    """Tables 2 and 3 from the ratings (see the module docstring for every definition)."""
    items = _items(key)
    by_item_rater = {(r.item, r.rater): r for r in ratings}
    run_names = [r["name"] for r in key.get("runs") or []]
    table2: dict[str, dict[str, list[float]]] = {name: {m: [] for m in ("acts", "correctness", "errors",
                                                                           "linguistic")} for name in run_names}
    metric_pairs: dict[str, list[tuple[Any, Any]]] = {m: [] for m in ("acts", "correctness", "errors", "cosine",
                                                                      "rouge_l")}
    label_pairs: dict[str, list[tuple[Any, Any]]] = {"acts": [], "correctness": []}
    outcomes: dict[tuple[str, str], dict[str, Any]] = {}
    for rating in ratings:
        group, candidate = items[rating.item]
        if candidate is None:
            labels = group["real"].get("labels") or {}
            if labels.get("act") is not None:
                label_pairs["acts"].append((rating.act, labels["act"]))
            if labels.get("correctness") is not None:
                label_pairs["correctness"].append((rating.correctness, labels["correctness"]))
            continue
        real = by_item_rater[(group["real"]["item"], rating.rater)]
        human = outcomes[(rating.item, rating.rater)] = _human_outcomes(rating, real)
        scores = table2.setdefault(candidate.get("run", "?"), {m: [] for m in human})
        for name, value in human.items():
            if value != NA:
                scores[name].append(float(value))
        auto = candidate["auto"]
        for name in ("acts", "correctness", "errors"):
            if auto.get(name) is not None:
                metric_pairs[name].append((human[name], auto[name]))
        for name in ("cosine", "rouge_l"):
            value = auto.get(name)
            if isinstance(value, int | float) and math.isfinite(value):
                metric_pairs[name].append((human["linguistic"], float(value)))

    # Human-human: the first two raters (in the tasks' rater order, then by name) of each rated turn.
    order = {r: n for n, r in enumerate((key.get("options") or {}).get("raters") or [])}
    raters_of: dict[str, list[str]] = {}
    for rating in ratings:
        raters_of.setdefault(rating.item, []).append(rating.rater)
    pair_values: dict[str, list[tuple[Any, Any]]] = {"acts": [], "correctness": [], "errors": [], "linguistic": []}
    shared_turns, shared_raters = 0, Counter()
    for item, who in raters_of.items():
        if len(who) < 2:
            continue
        first, second = sorted(who, key=lambda r: (order.get(r, len(order)), r))[:2]
        a, b = by_item_rater[(item, first)], by_item_rater[(item, second)]
        shared_turns += 1
        shared_raters[f"{first}+{second}"] += 1
        pair_values["acts"].append((a.act, b.act))
        pair_values["correctness"].append((a.correctness, b.correctness))
        if items[item][1] is not None:
            oa, ob = outcomes[(item, first)], outcomes[(item, second)]
            pair_values["errors"].append((oa["errors"], ob["errors"]))
            pair_values["linguistic"].append((oa["linguistic"], ob["linguistic"]))

    raters = Counter(r.rater for r in ratings)
    return {
        "kind": REPORT_KIND, "schema_version": SCHEMA_VERSION,
        "ratings": {"rated": len(ratings), "unrated_rows": unrated, "raters": dict(sorted(raters.items())),
                    "real_turns": sum(1 for r in ratings if items[r.item][1] is None),
                    "candidates": sum(1 for r in ratings if items[r.item][1] is not None),
                    "shared_turns": shared_turns, "shared_by": dict(shared_raters)},
        "table2": {name: {m: _mean(v) for m, v in scores.items()} for name, scores in table2.items()},
        "table3": {
            "human_metric": {
                "acts": _kappa(metric_pairs["acts"]),
                "correctness": _kappa_with_na(metric_pairs["correctness"]),
                "errors": _kappa_with_na(metric_pairs["errors"]),
                "linguistic_cosine": _pearson(metric_pairs["cosine"]),
                "linguistic_rouge_l": _pearson(metric_pairs["rouge_l"]),
            },
            "human_label": {"acts": _kappa(label_pairs["acts"]), "correctness": _kappa(label_pairs["correctness"])},
            "human_human": {"acts": _kappa(pair_values["acts"]), "correctness": _kappa(pair_values["correctness"]),
                            "errors": _kappa(pair_values["errors"]), "linguistic": _pearson(pair_values["linguistic"])},
        },
        "paper": {"table2": {m: dict(v) for m, v in TABLE2_HUMAN.items()},
                  "table3": {row: dict(v) for row, v in TABLE3.items()}},
    }


def write_report(report: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write the report as JSON, atomically."""
    path = Path(path)
    atomic_write_bytes(path, json.dumps(report, indent=2, ensure_ascii=False).encode() + b"\n")
    return path


def format_report(report: Mapping[str, Any]) -> str:
    """The report as two small tables, the paper's figures beside simhub's."""

    def num(value: float | None) -> str:
        return "-" if value is None else f"{value:.4f}"

    def cell(entry: Mapping[str, Any] | None, stat: str) -> str:
        if entry is None:
            return "-"
        return f"{num(entry.get(stat))} ({entry.get('n', 0)})"

    r = report["ratings"]
    raters = ", ".join(f"{name} {n}" for name, n in r["raters"].items())
    lines = [f"ratings: {r['rated']} rated turns ({r['real_turns']} real, {r['candidates']} simulated) by "
             f"{len(r['raters'])} rater(s) ({raters}); {r['shared_turns']} turns rated by two or more"
             + (f"; {r['unrated_rows']} rows left unrated" if r["unrated_rows"] else "")]
    columns = ("acts", "correctness", "errors", "linguistic")
    head = f"{'':<24}" + "".join(f"{c:>18}" for c in ("acts", "corr.", "errors", "linguistic"))
    if report["table2"]:
        lines += ["", "Human-evaluated scores (Table 2; mean (n), 1 is best)", head]
        for name, scores in report["table2"].items():
            lines.append(f"{name[:23]:<24}" + "".join(f"{cell(scores.get(c), 'mean'):>18}" for c in columns))
        lines.append("paper (190 turns; DPO 8B, Zero-Shot, Oracle):")
        for name, scores in report["paper"]["table2"].items():
            lines.append(f"{'  ' + name:<24}" + "".join(f"{num(scores.get(c)):>18}" for c in columns))
    t3 = report["table3"]
    hm, hl, hh = t3["human_metric"], t3["human_label"], t3["human_human"]
    lines += ["", "Agreement (Table 3; Cohen's kappa, Pearson for linguistic; (n) pairs)", head]
    rows = [
        ("human-metric", [cell(hm["acts"], "kappa"), cell(hm["correctness"], "kappa"), cell(hm["errors"], "kappa"),
                          "cos " + cell(hm["linguistic_cosine"], "pearson")]),
        ("", ["", "", "", "rouge-L " + cell(hm["linguistic_rouge_l"], "pearson")]),
        ("human-label", [cell(hl["acts"], "kappa"), cell(hl["correctness"], "kappa"), "-", "-"]),
        ("human-human", [cell(hh["acts"], "kappa"), cell(hh["correctness"], "kappa"), cell(hh["errors"], "kappa"),
                         cell(hh["linguistic"], "pearson")]),
    ]
    for label, cells in rows:
        lines.append(f"{label:<24}" + "".join(f"{c:>18}" for c in cells))
    paper = report["paper"]["table3"]
    lines.append("paper:")
    for row, label in (("human_metric", "human-metric"), ("human_label", "human-label"), ("human_human", "human-human")):
        lines.append(f"{'  ' + label:<24}" + "".join(f"{num(paper[row].get(c)):>18}" for c in columns))
    lines.append("(na counts as a category in correctness and errors; 'kappa_without_na' in the JSON leaves it out)")
    return "\n".join(lines)
