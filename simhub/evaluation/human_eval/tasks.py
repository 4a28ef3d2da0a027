"""Building the rating tasks: which runs are rated, which dialogue turns are drawn (seeded), and the
tasks folder :func:`write_tasks` writes from them (docs/human-eval.md, "drawing the turns").

One *group* per drawn student turn: raters see the question, the real history, the real turn and,
blinded and shuffled, each run's simulated turn; ``key.json`` records which run wrote which
candidate, the metrics' outcomes for it and the real turn's LLM labels.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simhub.config import CandidateRules
from simhub.errors import ConfigError, DataError
from simhub.evaluation.human_eval.layout import (
    ITEMS_FILE,
    KEY_FILE,
    NA,
    RATINGS_DIR,
    SCHEMA_VERSION,
    SHEETS_DIR,
    TASKS_KIND,
)
from simhub.evaluation.human_eval.sheets import json_line, rating_sheet, ratings_template
from simhub.evaluation.rundir import Run, ScoredTurn, load_run
from simhub.evaluation.runs import sha256_of
from simhub.metrics.judge import NO_LABEL, NOT_INCORRECT, REAL_NA
from simhub.schema import Dialogue, atomic_write_bytes
from simhub.scoring import apply_candidate_rules

__all__ = ["TaskOptions", "check_new_tasks_folder", "check_task_options", "load_task_runs", "write_tasks"]

_RATER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SLOTS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
#: Null reasons that mean the metric does not apply (its outcome is the category na, not a gap).
_NA_REASONS = {"correctness": {REAL_NA}, "errors": {REAL_NA, NOT_INCORRECT, NO_LABEL}}


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
    atomic_write_bytes(output / ITEMS_FILE, b"".join(json_line(line) for line in items))
    for rater in raters:
        mine = [item_lines[g] for g in assignment[rater]]
        atomic_write_bytes(output / SHEETS_DIR / f"{rater}.md", rating_sheet(rater, mine).encode())
        atomic_write_bytes(output / RATINGS_DIR / f"{rater}.csv", ratings_template(rater, mine).encode())
    atomic_write_bytes(output / KEY_FILE, json.dumps(key, indent=2, ensure_ascii=False).encode() + b"\n")
    return {"output": str(output), "groups": len(groups), "dialogues": len(drawn), "eligible": len(eligible),
            "runs": [name for name, _ in runs], "items": sum(1 + len(g["candidates"]) for g in groups),
            "per_rater": {r: len(gs) for r, gs in assignment.items()}}

