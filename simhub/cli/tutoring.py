"""``simhub tutor-bench``: rank tutors by what a learner learned from them, for every learner family.

The command is thin: ``--learner`` names a family (:func:`simhub.tutoring.family.parse_learner`),
whose registry entry adds its own options, runs its bench through the kit's runner, rescores and
reports (:mod:`simhub.tutoring.family`). ``agree`` and ``stability`` are library functions it calls.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING

from simhub.cli.common import add_executor, add_profile, job_executor

if TYPE_CHECKING:
    from simhub.tutoring.family import BenchContext

#: The default ``--learner`` (a ``--rescore`` that keeps it reads the family from the folder).
_DEFAULT_LEARNER = "knowsim"


def _context(args: argparse.Namespace) -> BenchContext:
    """What the command lends a family's run: the profile (read here, once), provisioning, the output
    check, the exit rules (the executor is added by the run)."""
    from simhub.cli.common import all_failed, check_output, profile_for
    from simhub.config import load_profile
    from simhub.tutoring.family import BenchContext

    def provision(*, simulators=(), tutors=(), models=(), loaded=None):
        return profile_for(args, metrics=[], simulators=list(simulators), tutors=list(tutors), models=list(models),
                           loaded=loaded)

    return BenchContext(provision=provision, check_output=lambda path: check_output(path, folder=True),
                        all_failed=all_failed, profile=load_profile(args.profile))


def _refuse_other_families(args: argparse.Namespace, parser_defaults: dict, owners: dict[str, str], mine: str) -> None:
    """A flag set away from its default that belongs to another family is an error naming that family."""
    from simhub.errors import ConfigError

    for dest, owner in owners.items():
        if owner != mine and getattr(args, dest, None) != parser_defaults.get(dest):
            raise ConfigError(f"--{dest.replace('_', '-')}: an option of the {owner} learner family "
                              f"(--learner {owner}), not of {mine}", field=dest)


def _actions(args: argparse.Namespace) -> int:
    from simhub.errors import ConfigError

    action = args.action
    if action[0] == "stability":
        from simhub.tutoring.family import ranking_stability

        result = ranking_stability(action[1:])
        print(f"tutor ranking across {len(action) - 1} runs ({len(result.tutors)} shared tutors: "
              f"{', '.join(result.tutors)})")
        for a in result.axes:
            mean = "n/a" if a.mean_tau is None else f"{a.mean_tau:.2f}"
            worst = "n/a" if a.worst_tau is None else f"{a.worst_tau:.2f}"
            print(f"  {a.axis}: mean pairwise Kendall tau {mean}, worst pair {worst}")
        return 0
    if action[0] == "certify":
        return _certify(args, action[1:])
    if action[0] != "agree" or len(action) != 3:
        raise ConfigError(f"unexpected arguments {' '.join(action)!r}; the subcommands are "
                          f"`simhub tutor-bench agree HUMAN.csv RUN_DIR`, `simhub tutor-bench stability "
                          f"RUN_DIR RUN_DIR...` and `simhub tutor-bench certify RUN_DIR RUN_DIR... --output DIR`",
                          field="action")
    from simhub.tutoring.knowsim.agree import format_agreement
    from simhub.tutoring.knowsim.family import agree_folder

    result, path = agree_folder(action[1], action[2], threshold=args.threshold, seed=args.seed)
    print(format_agreement(result))
    print(f"-> {path}")
    return 0


def _certify(args: argparse.Namespace, folders: list[str]) -> int:
    from simhub.cli.certify import certify_command

    return certify_command(args, folders, lambda: _context(args))


def _tutor_bench(args: argparse.Namespace) -> int:
    from simhub.errors import ConfigError
    from simhub.tutoring.family import family, family_of_folder, parse_learner

    if args.action:
        return _actions(args)
    if not args.output:
        raise ConfigError("--output: the run folder is required", field="output")
    learner = parse_learner(args.learner)
    fam = family(learner.family)
    if args.rescore and args.learner == _DEFAULT_LEARNER:  # a folder says which family it is
        fam = family_of_folder(args.output) or fam
    _refuse_other_families(args, args._defaults, args._owners, fam.name)
    if args.rescore:
        return fam.rescore(args, _context(args))
    if not args.tutor:
        raise ConfigError(f"--tutor: name at least one tutor ({fam.tutors_help})", field="tutor")
    ctx = _context(args)
    executor = job_executor(args, ctx.profile)  # before any model is built
    try:
        return fam.run(args, learner, dataclasses.replace(ctx, executor=executor))
    finally:
        executor.close()


def register(sub) -> None:
    from simhub.tutoring.family import families, learner_forms

    p = sub.add_parser("tutor-bench", help="rank tutors by what a learner learns from them (KnowSim's "
                       "knowledge-state learner, the multi-day KT learner)",
                       description="Run a tutor bench (--output DIR), rescore one (--rescore), check it against "
                                   "human ratings (simhub tutor-bench agree HUMAN.csv RUN_DIR), or check its ranking's "
                                   "stability across runs (simhub tutor-bench stability RUN_DIR RUN_DIR...), or "
                                   "certify it across learner families (simhub tutor-bench certify RUN_DIR... "
                                   "--output DIR).")
    p.add_argument("action", nargs="*", metavar="agree HUMAN.csv RUN_DIR | stability RUN_DIR... | certify [RUN_DIR...]",
                   help="agree: KnowSim's validation protocol against human ratings (docs/tutor-bench.md); "
                   "stability: the Kendall tau of the tutor ranking across runs of one learner family, e.g. one "
                   "per --role-player or --seed (docs/kt-learner.md); certify: the same tutors under two or more "
                   "learner families, their concordance with intervals, rank flips and known groups (a folder more "
                   "of a family gives its run-to-run floor; with no folder, the designed tutors are run under "
                   "every family first; docs/guides/rank-tutors.md)")
    add_profile(p)
    fams = families()
    p.add_argument("--tutor", action="append", help="a tutor (repeatable): " + "; ".join(
        f"{f.name}: {f.tutors_help}" for f in fams))
    p.add_argument("--learner", default=_DEFAULT_LEARNER, help=f"the learner: {', '.join(learner_forms())} (knowsim: "
                   "the scripted stand-in voices the knowledge-state learner; knowsim:MODEL a profile model role-plays "
                   "it; zs/zs-cot/zs-cot-prof:MODEL the stateless baselines; kt-learner the multi-day KT-grounded "
                   "learner) (default: knowsim)")
    p.add_argument("--seed", type=int, default=0, help="seed of the learners, the sampling and the bootstrap (default 0)")
    p.add_argument("--known-order", metavar="TUTOR,TUTOR,...", help="certify: tutors whose order on learning is "
                   "known by design, worst first (the known-groups check)")
    p.add_argument("--student", metavar="SIMULATOR", help="certify with no folders: the simulator of the "
                   "sim-student family (default: the profile's smol-base, else its first simulator)")
    p.add_argument("--no-realism", action="store_true", help="certify: leave out each learner's realism "
                   "certificate (its dialogues against real ones on the same questions)")
    p.add_argument("--output", help="the run folder: traces/, run.json, results.json")
    p.add_argument("--rescore", action="store_true", help="recompute the results from the folder's traces with no "
                   "model call (the folder's family; knowsim: under --preset/--set, written to rescored-PRESET.json)")
    p.add_argument("--batch", type=int, default=16, help="episodes (conversations, runs) advanced together (default 16)")
    p.add_argument("--bootstrap", type=int, default=2000, help="cluster-bootstrap resamples and permutations "
                   "(default 2000)")
    add_executor(p)
    p.add_argument("--cache-dir", help="content-addressed cache (default: $SIMHUB_HOME/cache)")
    p.add_argument("--no-cache", action="store_true", help="read and write no cache (every model call is made)")
    owners: dict[str, str] = {}
    for fam in fams:
        before = {a.dest for a in p._actions}
        fam.add_arguments(p.add_argument_group(f"--learner {fam.name} ({fam.docs})"))
        owners.update({a.dest: fam.name for a in p._actions if a.dest not in before})
    p.set_defaults(handler=_tutor_bench, _owners=owners,
                   _defaults={a.dest: a.default for a in p._actions if a.dest in owners})
