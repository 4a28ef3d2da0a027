"""``simhub tutor-bench certify``: the statistics (:mod:`simhub.tutoring.certify`), the runs from nothing
(:func:`simhub.tutoring.family.run_certification`) and the realism certificate of every learner.

The realism certificate sits here, above both the benches and the evaluation: each family's learner
dialogues (:meth:`~simhub.tutoring.family.LearnerFamily.learner_dialogues`) are scored by
``simhub eval-dialogues``'s statistics against the sample corpus's real dialogues on the same
questions, beside the same statistics of real against real (each question's real dialogues split in
two halves), so a value is read against what two sets of real students already differ by.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

#: The dialogue-level statistics a realism certificate states (``docs/guides/rank-tutors.md``).
CERTIFICATE_METRICS = ("detect_auroc", "acts_jsd", "length_w1", "turns_w1")


def certify_command(args: argparse.Namespace, folders: list[str], context: Any) -> int:
    from simhub.cli.common import check_output
    from simhub.errors import ConfigError
    from simhub.schema import atomic_write_bytes
    from simhub.tutoring.certify import format_certification
    from simhub.tutoring.family import certify_folders

    if not args.output:
        raise ConfigError("--output: certify writes DIR/results.json; name the folder", field="output")
    check_output(args.output, folder=True)
    if not folders:  # a certification from nothing: the designed tutors under every default family
        from simhub.tutoring.family import run_certification

        folders = run_certification(args, context, args.output, _student(args))
    order = [t.strip() for t in args.known_order.split(",")] if args.known_order else None
    doc = certify_folders(folders, known_order=order, n_resamples=args.bootstrap, seed=args.seed)
    if not args.no_realism:
        doc["realism"] = realism_certificates(args, {f: runs[0] for f, runs in doc["folders"].items()})
    path = Path(args.output) / "results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, (json.dumps(doc, indent=2) + "\n").encode())
    print(format_certification(doc))
    print(f"-> {path}")
    return 0


def _student(args: argparse.Namespace) -> str:
    """certify's student: --student, else the profile's smol-base, else its first simulator."""
    from simhub.config import load_profile
    from simhub.errors import ConfigError

    if args.student:
        return args.student
    sims = list(load_profile(args.profile).simulators)
    if not sims:
        raise ConfigError("--student: the profile has no simulators; name one", field="student")
    return "smol-base" if "smol-base" in sims else sims[0]


def _key(text: str) -> str:
    return " ".join(text.split())


def realism_certificates(args: argparse.Namespace, folder_of: dict[str, str]) -> dict[str, Any]:
    """Per family, its learner's certificate: :data:`CERTIFICATE_METRICS` with their dialogue-bootstrap
    intervals against the real dialogues on the same questions, and the real-vs-real reference on those
    questions; or the reason there is none."""
    from simhub.cli.common import profile_for
    from simhub.config import load_profile
    from simhub.data.sample import load_sample_corpus
    from simhub.errors import SimhubError
    from simhub.evaluation.dialogue_eval import DialogueEvalOptions, eval_dialogues
    from simhub.tutoring.family import family

    corpus = load_sample_corpus()
    real_all = [d for split in ("train", "val", "test") for d in corpus[split]]
    questions = {_key(d.question.text) for d in real_all}
    out: dict[str, Any] = {}
    todo: dict[str, tuple[list[Any], list[Any], int]] = {}
    for name, folder in folder_of.items():  # every family's dialogues first: no model is built for none
        try:
            sim = family(name).learner_dialogues(folder)
        except SimhubError as exc:
            out[name] = {"reason": str(exc)}
            continue
        kept = [d for d in sim if _key(d.question.text) in questions and any(t.role == "student" for t in d.turns)]
        asked = {_key(d.question.text) for d in kept}
        real = [d for d in real_all if _key(d.question.text) in asked]
        if not kept or len(real) < 4:
            out[name] = {"reason": f"{len(kept)} of {len(sim)} learner dialogues are on a question of the sample corpus "
                                   f"({len(real)} real dialogues on them); a certificate needs some and 4 real ones"}
            continue
        todo[name] = (kept, real, len(sim))
    if not todo:
        return out
    profile = profile_for(args, simulators=[], tutors=[], loaded=load_profile(args.profile))
    options = DialogueEvalOptions(n_resamples=max(100, min(args.bootstrap, 1000)), seed=args.seed,
                                  cache_dir=args.cache_dir, no_cache=args.no_cache, progress=False)
    references: dict[frozenset[str], dict[str, Any]] = {}
    for name, (kept, real, total) in todo.items():
        print(f"certify: realism of the learner of {name} ({len(kept)} dialogues, {len(real)} real)", file=sys.stderr)
        scored = eval_dialogues(profile, real, kept, options)
        asked = frozenset(_key(d.question.text) for d in kept)
        if asked not in references:
            half_a, half_b = _halves(real)
            references[asked] = eval_dialogues(profile, half_a, half_b, options) if len(half_a) >= 2 and half_b else {}
        ref = references[asked]
        out[name] = {"dialogues": len(kept), "left_out": total - len(kept), "real": len(real), "questions": len(asked),
                     "metrics": {m: _stat(scored, m) for m in CERTIFICATE_METRICS},
                     "reference": {m: _stat(ref, m) for m in CERTIFICATE_METRICS} if ref else None}
    return out


def _halves(real: list[Any]) -> tuple[list[Any], list[Any]]:
    """Each question's real dialogues dealt alternately into two halves (in the corpus's order)."""
    by_q: dict[str, list[Any]] = {}
    for d in real:
        by_q.setdefault(_key(d.question.text), []).append(d)
    a = [d for ds in by_q.values() for d in ds[0::2]]
    b = [d for ds in by_q.values() for d in ds[1::2]]
    return a, b


def _stat(results: dict[str, Any], name: str) -> dict[str, Any] | None:
    m = results.get("metrics", {}).get(name)
    if m is None:
        return None
    return {"value": m["value"], "ci95": m["ci95"]}
