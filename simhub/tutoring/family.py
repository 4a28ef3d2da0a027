"""Learner families: the bench interface, its registry, the outputs each declares, and the one grammar
of learner names.

A *learner family* is a kind of learner a tutor is put in front of, with what it takes to run one
bench of it: KnowSim's knowledge-state learner (``knowsim``, with its stateless baselines) and
EduClaw-Bench's KT-grounded learner with an LMS (``kt-learner``). Each is a :class:`LearnerFamily`
registered in :data:`FAMILIES` (a :class:`~simhub.registry.LazyRegistry`, like the metrics; plugins add
theirs through the ``simhub.learner_families`` entry-point group). A family

* accepts some learner names (:attr:`LearnerFamily.forms`: ``knowsim``, ``knowsim:MODEL``,
  ``zs:MODEL``...), parsed in one place (:func:`parse_learner`);
* adds its own options to ``simhub tutor-bench`` (one argument group; a flag of another family is
  refused, naming that family);
* runs a bench through the kit's runner (:mod:`simhub.tutoring.runner`), rescores a folder, and
  renders its folders in ``simhub report`` (found by the ``kind`` of their ``results.json``);
* declares its outputs (:class:`BenchOutput`: name, label, better direction, ranked or not, digits,
  scale), which its results tables, ranks, report and ``stability`` read.

``docs/architecture.md`` ("Where to add things") shows a new family end to end.
"""

from __future__ import annotations

import argparse
import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, ClassVar

from simhub.errors import UnknownNameError
from simhub.registry import LazyRegistry
from simhub.tutoring.report import leaderboard_section, read_kit_results, results_kind

__all__ = [
    "FAMILIES",
    "AxisStability",
    "BenchContext",
    "BenchOutput",
    "LearnerFamily",
    "LearnerName",
    "Stability",
    "bench_sections",
    "families",
    "family",
    "family_of_folder",
    "learner_forms",
    "parse_learner",
    "ranking_stability",
    "run_certification",
]


@dataclasses.dataclass(frozen=True)
class BenchOutput:
    """One measure a family reports per tutor, declared once (like a metric's card)."""

    name: str
    label: str
    higher_is_better: bool = True
    #: Part of the family's ranking (KnowSim's mean rank R̄; the KT learner's ranking is on ΔSolve).
    ranked: bool = False
    #: Decimal places shown, of the value times ``scale`` (ΔSolve is shown in percentage points).
    digits: int = 2
    scale: float = 1.0
    unit: str = ""
    description: str = ""

    @property
    def arrow(self) -> str:
        return "↑" if self.higher_is_better else "↓"


@dataclasses.dataclass(frozen=True)
class BenchContext:
    """What the command line lends a family's run (it sits above the kit): provisioning the profile's
    models a run needs, the output check, and the exit status when everything failed."""

    #: ``provision(simulators=[...], tutors=[...], models=[...], loaded=profile)``: the profile narrowed to
    #: those entries, built (:func:`simhub.cli.common.profile_for`).
    provision: Callable[..., Any]
    #: ``check_output(path)``: refuse an output folder that cannot be written, before anything runs.
    check_output: Callable[[str], None]
    #: ``all_failed(what, total, causes)``: say every one failed, with the causes; the exit status.
    all_failed: Callable[[str, int, Sequence[str]], int]
    #: Where the runner's batches run (:mod:`simhub.executors`); None: in this process.
    executor: Any = None
    #: The profile ``--profile`` names, as read (not narrowed, nothing built): read once per command.
    profile: Any = None

    def report_lost(self, runner: Any, unit: str) -> int | None:
        """Say on stderr which episodes another executor lost (every try of their batch failed); the exit
        status when nothing at all was run, else None (the run goes on: they run on the next run)."""
        lost = runner.lost
        if not lost:
            return None
        import sys

        print(f"simhub: {len(lost)} {unit} lost on the executor (rerun the command to run them): "
              f"{'; '.join(runner.report.failures[:3])}", file=sys.stderr)
        if len(lost) == runner.report.episodes:
            return self.all_failed(unit, len(lost), runner.report.failures)
        return None


@dataclasses.dataclass(frozen=True)
class LearnerName:
    """A parsed ``--learner``: its family, the head (``knowsim``, ``zs``...) and the model after ``:``."""

    text: str
    family: str
    head: str
    model: str | None


class LearnerFamily(ABC):
    """A learner family (see the module docstring). Subclasses set the class attributes and implement
    :meth:`run` and :meth:`rescore`; :meth:`report_section` and :meth:`owns` have defaults."""

    #: The registry name.
    name: ClassVar[str]
    #: Heading of its report section.
    title: ClassVar[str]
    #: The learner names it accepts (``MODEL`` marks a profile model after the colon).
    forms: ClassVar[tuple[str, ...]]
    #: The ``kind`` of its ``results.json`` (how ``simhub report`` finds its folders).
    results_kind: ClassVar[str]
    #: What it reports per tutor, in order.
    outputs: ClassVar[tuple[BenchOutput, ...]]
    #: Its page under ``docs/``.
    docs: ClassVar[str] = "docs/tutor-bench.md"
    #: Its tutors, for ``--tutor``'s help.
    tutors_help: ClassVar[str] = ""
    #: What its tutors must do: ``text`` (write turns) or ``tools`` (act on an environment).
    capability: ClassVar[str] = "text"
    #: Its scripted tutors, by name (a ``module:Class`` string or the class).
    scripted: ClassVar[dict[str, Any]] = {}

    @classmethod
    def heads(cls) -> list[str]:
        return list(dict.fromkeys(f.partition(":")[0] for f in cls.forms))

    @classmethod
    def output(cls, name: str) -> BenchOutput:
        for o in cls.outputs:
            if o.name == name:
                return o
        raise KeyError(name)

    @classmethod
    def ranked(cls) -> list[str]:
        return [o.name for o in cls.outputs if o.ranked]

    def build_tutor(self, name: str, profile: Any = None, *, options: Any = None, no_cache: bool = False) -> Any:
        """The tutor ``name`` for this family's bench: one of its scripted tutors, or a profile tutor with
        the capability it needs (:func:`simhub.tutoring.tutors.build_bench_tutor`)."""
        from simhub.tutoring.tutors import build_bench_tutor

        return build_bench_tutor(name, profile, scripted=self.scripted, capability=self.capability, options=options,
                                 no_cache=no_cache)

    def add_arguments(self, group: argparse._ArgumentGroup) -> None:  # noqa: B027 (no options is fine)
        """Add this family's options to ``simhub tutor-bench`` (its own group)."""

    @abstractmethod
    def run(self, args: argparse.Namespace, learner: LearnerName, ctx: BenchContext) -> int:
        """``simhub tutor-bench --learner ... --output DIR``: run the bench, write its results, print them."""

    @abstractmethod
    def rescore(self, args: argparse.Namespace, ctx: BenchContext) -> int:
        """``simhub tutor-bench --rescore --output DIR``: the results again from the folder's traces."""

    def owns(self, folder: str | PathLike[str]) -> bool:
        """Whether ``folder`` is a run folder of this family (its ``results.json`` kind says so)."""
        return results_kind(folder) == self.results_kind

    def report_section(self, folders: Sequence[str]) -> tuple[str, str, str]:
        """The ``simhub report`` section of this family's run folders: (id, heading, HTML). The default is
        the kit's leaderboard of the declared outputs (:func:`simhub.tutoring.report.leaderboard_section`)."""
        return leaderboard_section(self, folders)

    def report_title(self, folders: Sequence[str]) -> str | None:
        """The report's title when only this family's folders are on it (None: the default title)."""
        return None

    def rankings(self, folder: str) -> dict[str, dict[str, float | None]]:
        """Per ranked output, each tutor's value in the folder's results (for ``stability``)."""
        r = read_kit_results(Path(folder) / "results.json")
        return {o: {t: (e[o].mean if o in e else None) for t, e in r.tutors.items()} for o in self.ranked()}

    def outcomes(self, folder: str) -> Any:
        """Each episode's learning outcome in the run folder, as ``simhub tutor-bench certify`` compares
        families (:class:`simhub.tutoring.certify.FamilyOutcomes`; a failed episode's value None). A
        family that does not give them is refused there, naming it."""
        from simhub.errors import ConfigError

        raise ConfigError(f"certify: the {self.name} learner family does not give its episodes' learning outcomes",
                          field="action")

    def learner_dialogues(self, folder: str) -> list[Any]:
        """The learner's side of the run folder's conversations as dialogues (:class:`~simhub.schema.Dialogue`; the
        learner's turns as ``student`` turns, on the question text of the real dialogues about the same
        item), for the realism certificate of ``simhub tutor-bench certify`` and ``simhub eval-dialogues``.
        A family that has none is refused there, naming it."""
        from simhub.errors import ConfigError

        raise ConfigError(f"certify: the {self.name} learner family does not give its learner's dialogues",
                          field="action")


#: Every learner family, by name (built-ins as ``module:attribute`` strings, imported on first use).
FAMILIES: LazyRegistry[type[LearnerFamily]] = LazyRegistry(
    "learner family",
    {"knowsim": "simhub.tutoring.knowsim.family:KnowSimFamily",
     "kt-learner": "simhub.tutoring.lms.family:KTLearnerFamily",
     "sim-student": "simhub.tutoring.probe.family:SimStudentFamily"},
    group="simhub.learner_families")


def family(name: str) -> LearnerFamily:
    """The family registered as ``name`` (an instance)."""
    return FAMILIES.get(name)()


def families() -> list[LearnerFamily]:
    """Every registered family, in registration order."""
    return [family(n) for n in FAMILIES.names()]


def learner_forms() -> list[str]:
    """Every learner name form of every family (for errors and help)."""
    return [f for fam in families() for f in fam.forms]


def parse_learner(text: str) -> LearnerName:
    """``--learner``'s value: its family by the name's head (before ``:``); an unknown head is an
    UnknownNameError listing every family's forms. A form with ``MODEL`` needs one after the colon."""
    head, colon, model = text.strip().partition(":")
    for fam in families():
        if head in fam.heads():
            takes_model = any(f.startswith(f"{head}:") for f in fam.forms)
            bare = head in fam.forms
            if (colon and not takes_model) or (not colon and not bare) or (colon and not model):
                from simhub.errors import ConfigError

                shown = ", ".join(f for f in fam.forms if f.partition(":")[0] == head)
                raise ConfigError(f"--learner {text}: the {fam.name} family takes {shown}", field="learner")
            return LearnerName(text=text.strip(), family=fam.name, head=head, model=model or None)
    raise UnknownNameError("learner", text, learner_forms(), field="learner")


def family_of_folder(folder: str | PathLike[str]) -> LearnerFamily | None:
    """The family whose run folder ``folder`` is (None: not a tutor-bench folder)."""
    for fam in families():
        if fam.owns(folder):
            return fam
    return None


@dataclasses.dataclass(frozen=True)
class AxisStability:
    """How one output's tutor ranking agrees across run folders: Kendall τ over every pair of folders."""

    axis: str
    mean_tau: float | None
    worst_tau: float | None
    folders: int


@dataclasses.dataclass(frozen=True)
class Stability:
    tutors: list[str]
    axes: list[AxisStability]


def ranking_stability(folders: Sequence[str]) -> Stability:
    """``simhub tutor-bench stability RUN_DIR RUN_DIR...``: the tutor ranking's agreement across run folders
    of one family (the same tutors with other seeds or other role-players), per ranked output that every
    folder has (:meth:`LearnerFamily.rankings`). A ConfigError when fewer than two folders or two shared
    tutors, or folders of no family or of two."""
    import itertools

    from simhub.errors import ConfigError
    from simhub.learners.kt.metrics import kendall_tau, mean_pairwise_kendall

    if len(folders) < 2:
        raise ConfigError("stability: name at least two tutor-bench run folders", field="action")
    owners = {}
    for d in folders:
        fam = family_of_folder(d)
        if fam is None:
            raise ConfigError(f"stability: {d} is not a tutor-bench run folder (no results.json of a learner family)",
                              field="action")
        owners[d] = fam
    if len({f.name for f in owners.values()}) > 1:
        raise ConfigError(f"stability: the folders are of different learner families "
                          f"({', '.join(sorted({f.name for f in owners.values()}))}); compare one family's runs",
                          field="action")
    runs = {d: owners[d].rankings(d) for d in folders}
    shared = set.intersection(*({t for axis in r.values() for t in axis} for r in runs.values()))
    if len(shared) < 2:
        raise ConfigError(f"stability: the folders share {len(shared)} tutor(s); a ranking needs two", field="action")
    axes = []
    for axis in next(iter(runs.values())):
        scorings = []
        for r in runs.values():
            v = {t: r.get(axis, {}).get(t) for t in sorted(shared)}
            if all(x is not None for x in v.values()):
                scorings.append(v)
        if len(scorings) < 2:
            continue
        pairs = [kendall_tau(a, b) for a, b in itertools.combinations(scorings, 2)]
        defined = [p for p in pairs if p is not None]
        axes.append(AxisStability(axis, mean_pairwise_kendall(scorings), min(defined) if defined else None,
                                  len(scorings)))
    return Stability(sorted(shared), axes)


def certify_folders(folders: Sequence[str], *, known_order: Sequence[str] | None = None, n_resamples: int = 2000,
                    seed: int = 0) -> dict[str, Any]:
    """``simhub tutor-bench certify RUN_DIR...``: the folders grouped by learner family; every folder of
    a family enters :func:`certify` (its episodes pooled, each item's or scenario's episodes of every
    folder resampled together), and a family with more folders (other seeds, other role-players) also
    gives the run-to-run floor: the mean pairwise Kendall τ of its folders' tutor means, against which
    the cross-family agreement is read (:mod:`simhub.tutoring.certify` has the statistics).
    Returns the ``results.json`` document."""
    from datetime import UTC, datetime

    from simhub import __version__
    from simhub.errors import ConfigError
    from simhub.learners.kt.metrics import mean_pairwise_kendall
    from simhub.tutoring.certify import (
        CERTIFICATION_KIND,
        CERTIFICATION_VERSION,
        W_THRESHOLD,
        FamilyOutcomes,
        certify,
        tutor_means,
    )

    by_family: dict[str, list[tuple[str, FamilyOutcomes]]] = {}
    for folder in folders:
        fam = family_of_folder(folder)
        if fam is None:
            raise ConfigError(f"certify: {folder} is not a tutor-bench run folder (no results.json of a learner "
                              "family)", field="action")
        by_family.setdefault(fam.name, []).append((str(folder), fam.outcomes(folder)))
    for name, runs in by_family.items():  # a family's folders (its run-to-run floor) are on the same units
        units = [({c for _, c, _ in o.episodes}, f) for f, o in runs]
        for theirs, folder in units[1:]:
            if theirs != units[0][0]:
                only_first, only_other = sorted(units[0][0] - theirs), sorted(theirs - units[0][0])
                raise ConfigError(f"certify: {folder} and {units[0][1]} ({name}) are on different items or scenarios "
                                  f"(only the first: {', '.join(only_first[:5]) or 'none'}; only {folder}: "
                                  f"{', '.join(only_other[:5]) or 'none'}); a run-to-run floor compares the same ones",
                                  field="action")
    # every folder of a family enters its ranking: each item's (scenario's) episodes of every seed are
    # resampled together, so the rank intervals cover seeds as well as items
    first = [FamilyOutcomes(runs[0][1].family, runs[0][1].outcome, [e for _, o in runs for e in o.episodes],
                            runs[0][1].higher_is_better) for runs in by_family.values()]
    if known_order is None:  # the designed tutors' chain, when every family ran all of it
        from simhub.tutoring.designed import KNOWN_ORDER

        if all(set(KNOWN_ORDER) <= set(o.tutors()) for o in first):
            known_order = list(KNOWN_ORDER)
    result = certify(first, known_order=known_order, n_resamples=n_resamples, seed=seed)
    floors = {}
    for name, runs in by_family.items():
        if len(runs) > 1:
            scorings = [{t: v * (1 if o.higher_is_better else -1) for t, v in tutor_means(o).items()} for _, o in runs]
            floors[name] = {"folders": [f for f, _ in runs], "mean_tau": mean_pairwise_kendall(scorings)}
    return {
        "schema_version": CERTIFICATION_VERSION, "kind": CERTIFICATION_KIND,
        "created": datetime.now(UTC).isoformat(timespec="seconds"), "simhub_version": __version__,
        "folders": {name: [f for f, _ in runs] for name, runs in by_family.items()},
        "outcomes": {o.family: o.outcome for o in first},
        "tutors": result.tutors, "families": result.families,
        "means": result.means, "ranks": result.ranks,
        "rank_ci95": {f: {t: [float(x) for x in ci] for t, ci in r.items()} for f, r in result.rank_ci95.items()},
        "failed": result.failed,
        "concordance": {"kendall_w": result.w, "w_ci95": list(result.w_ci95), "w_permutation_p": result.w_p,
                        "w_threshold": W_THRESHOLD,
                        "kendall_tau": [{"families": list(k), "tau": v[0], "ci95": list(v[1]) if v[1] else None}
                                        for k, v in result.tau.items()],
                        "run_to_run_floor": floors},
        "flips": [dataclasses.asdict(f) for f in result.flips],
        "known_groups": {"order": list(known_order or []),
                         "families": {f: [{**dataclasses.asdict(p), "ci95": list(p.ci95), "recovered": p.recovered}
                                          for p in pairs] for f, pairs in result.known_groups.items()}},
        "verdict": {"certified": result.certified, "reasons": result.reasons, "notes": result.notes},
        "settings": {"n_resamples": n_resamples, "seed": seed},
    }



#: What ``simhub tutor-bench certify --output DIR`` runs when it names no folder: each family, its learner
#: name and its options left at their defaults otherwise (the student: ``--student``).
CERTIFY_PLAN = (("knowsim", "knowsim", {"n": 8}), ("kt-learner", "kt-learner", {}),
                ("sim-student", "student:{student}", {"questions": 6}))


def run_certification(args: argparse.Namespace, context: Callable[[], BenchContext], output: str,
                      student: str) -> list[str]:
    """The run folders of a certification from nothing: the designed tutors and any ``--tutor`` under
    each family of :data:`CERTIFY_PLAN`, in ``OUTPUT/runs/FAMILY`` (a rerun resumes them). ``context``
    gives each run its :class:`BenchContext`; a run that fails stops here with its exit status named."""
    import sys

    from simhub.errors import ConfigError
    from simhub.tutoring.designed import DESIGNED

    folders = []
    for name, learner_text, options in CERTIFY_PLAN:
        folder = str(Path(output) / "runs" / name)
        fam = family(name)
        tutors = list(dict.fromkeys([*DESIGNED, *(args.tutor or [])]))
        chosen = {k: v for k, v in options.items() if getattr(args, k, None) is None}
        ns = argparse.Namespace(**{**vars(args), **chosen, "tutor": tutors, "output": folder, "action": [],
                                   "learner": learner_text.format(student=student)})
        print(f"certify: {name} ({len(tutors)} tutors) -> {folder}", file=sys.stderr)
        code = fam.run(ns, parse_learner(ns.learner), context())
        if code:
            raise ConfigError(f"certify: the {name} run exited with {code}; see {folder}", field="action")
        folders.append(folder)
    return folders


def bench_sections(folders: Sequence[str]) -> tuple[list[tuple[str, str, str]], list[str], str | None]:
    """The report sections of the tutor-bench folders among ``folders`` (one per family, in registry
    order), the folders that are not tutor-bench folders, and a title when only one family is there."""
    from simhub.tutoring.certify import CERTIFICATION_KIND, certification_section

    by_family: dict[str, list[str]] = {}
    others, certifications = [], []
    fams = families()
    for folder in folders:
        owner = next((f for f in fams if f.owns(folder)), None)
        if owner is not None:
            by_family.setdefault(owner.name, []).append(folder)
        elif results_kind(folder) == CERTIFICATION_KIND:
            certifications.append(folder)
        else:
            others.append(folder)
    sections = [f.report_section(by_family[f.name]) for f in fams if f.name in by_family]
    sections += [certification_section(folder) for folder in certifications]
    title = "Tutor ranking certification" if certifications and not others and not by_family else None
    if not others and not certifications and len(by_family) == 1:
        (only,) = [f for f in fams if f.name in by_family]
        title = only.report_title(by_family[only.name])
    return sections, others, title
