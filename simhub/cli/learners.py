"""``simhub learners ...``: knowledge-state learners (replaying knowsim runs, checking IU graphs)."""

from __future__ import annotations

import argparse
import json

from simhub.errors import ConfigError


def _overrides(pairs: list[str] | None) -> dict:
    import yaml

    out = {}
    for pair in pairs or []:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise ConfigError(f"preset override {pair!r}: expected FIELD=VALUE", field="preset")
        out[key.strip()] = yaml.safe_load(value)
    return out


def _replay(args: argparse.Namespace) -> int:
    import msgspec

    from simhub.learners.presets import resolve_preset
    from simhub.learners.replay import format_result, replay_file

    preset = resolve_preset(args.preset, _overrides(args.set))
    result = replay_file(args.run, args.graphs, preset)
    if args.json:
        print(json.dumps(msgspec.to_builtins(result), indent=2, ensure_ascii=False))
    else:
        results = result if isinstance(result, list) else [result]
        print("\n\n".join(format_result(r) for r in results))
    return 0


def _check(args: argparse.Namespace) -> int:
    from simhub.learners.graph import read_graphs, validate_graph

    graphs = read_graphs(args.file)
    for name, graph in graphs.items():
        checked = validate_graph(graph, name=name, file=args.file)
        depth = max(checked.depth.values())
        print(f"{name}: {checked.size} IUs, {len(graph.edges)} edges, depth {depth}, "
              f"{len(checked.warnings)} warning{'s' if len(checked.warnings) != 1 else ''}")
        for w in checked.warnings:
            print(f"  {w.code}: {w.message}")
    return 0


def register(sub) -> None:
    learners = sub.add_parser("learners", help="knowledge-state learners: replay knowsim runs, check IU graphs")
    lsub = learners.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND", parser_class=type(learners))

    p = lsub.add_parser("replay", help="recompute a knowsim run log's states, loads and metrics under a preset")
    p.add_argument("run", help="a knowsim run log (JSON: one run, or a list of runs)")
    p.add_argument("--graphs", required=True, help="the IU graphs: a knowsim IU cache or a simhub graph file")
    p.add_argument("--preset", default="released", help="paper or released (default: released, the code that "
                   "wrote knowsim's logs)")
    p.add_argument("--set", action="append", metavar="FIELD=VALUE",
                   help="override a preset field, e.g. softening=1.0 or mention_weights.unaware=2 (repeatable)")
    p.add_argument("--json", action="store_true", help="print JSON (a list when the log holds a list)")
    p.set_defaults(handler=_replay)

    p = lsub.add_parser("check", help="validate an IU graph file: errors exit 2, warnings are listed")
    p.add_argument("file", help="a simhub graph file (JSON or YAML), a knowsim IU cache, or one graph")
    p.set_defaults(handler=_check)
