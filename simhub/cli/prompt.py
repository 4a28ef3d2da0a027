"""``simhub prompt show``: the exact text a model receives for one turn (after its chat template)."""

from __future__ import annotations

import argparse

from simhub.cli.common import add_profile, profile_for
from simhub.errors import ConfigError

#: ``--model`` choices: metric model -> registry name.
METRIC_MODELS = {"acts": "acts", "judge": "judge", "kt": "knowledge", "tutor": "tutor_response"}


def _dialogue(path: str, dialogue_id: str):
    from simhub.errors import UnknownNameError
    from simhub.schema import read_jsonl

    dialogues = read_jsonl(path)
    for d in dialogues:
        if d.id == dialogue_id:
            return d
    raise UnknownNameError("dialogue", dialogue_id, [d.id for d in dialogues][:20], field="dialogue")


def training_text(args, profile, dialogue, turn: int) -> str:
    """The training form: what the model is trained on for this dialogue (or turn)."""
    from simhub.models import load_lm
    from simhub.prompts import act_messages, student_messages, tutor_messages

    if args.model is None:
        from simhub.simulation import build_simulator

        sim = build_simulator(args.simulator, profile)
        if sim.kind != "model":
            raise ConfigError(f"simulator: {args.simulator} is not one of our models; it has no training form",
                              field="simulator")
        return sim.load().chat_text(student_messages(dialogue, persona=sim.config.persona, end_marker=True),
                                    add_generation_prompt=False)
    m = profile.scoring.metrics
    if args.model == "acts":
        real = dialogue.turns[turn]
        messages = [*act_messages(dialogue.turns[:turn], real.content, dialogue),
                    {"role": "assistant", "content": real.act or "(no label)"}]
        return load_lm(m.acts.plain()).chat_text(messages, add_generation_prompt=False)
    if args.model == "tutor":
        return load_lm(m.tutor_response.plain()).chat_text(tutor_messages(dialogue, end_marker=True),
                                                           add_generation_prompt=False)
    if args.model == "kt":
        from simhub.metrics.knowledge import build_kt_prompt
        from simhub.training.data import kt_samples

        lm = load_lm(m.knowledge.plain())
        samples = [s for s in kt_samples(dialogue) if len(s[0]) + 1 == turn]
        if not samples:
            raise ConfigError(f"turn: turn {turn} is not a student turn after a tutor turn with labelled KCs and a "
                              "correct/incorrect label, so the KT model has no training example there", field="turn")
        history, kcs, label = samples[0]
        p = build_kt_prompt(lm.tokenizer, dialogue, history, kcs, persona=m.knowledge.persona)
        questions = [lm.tokenizer.decode(p.input_ids[a:b]) for a, b in p.segments]
        return (lm.tokenizer.decode(p.input_ids[: p.context_len]) + "\n".join(questions)
                + f"\n\n(label: next student turn {'correct' if label else 'incorrect'})")
    raise ConfigError("model: the judge is a prompted model; it has no training form", field="model")


def _show(args: argparse.Namespace) -> int:
    from simhub.metrics import MetricContext, ScoreItem, metric_class
    from simhub.simulation import Target, build_simulator, with_icl_pool

    if args.model is None and args.simulator is None:
        raise ConfigError("simulator: name a simulator, or a metric model with model", field="simulator")
    needs = [METRIC_MODELS[args.model]] if args.model else []
    dialogue = _dialogue(args.data, args.dialogue)
    turn = args.turn
    dialogue.check_student_turn(turn, "turn")
    profile = profile_for(args, metrics=needs, simulators=[args.simulator] if args.simulator else [], tutors=[])
    if args.training:
        print(training_text(args, profile, dialogue, turn))
        return 0
    if args.model is None:
        print(build_simulator(args.simulator, with_icl_pool(profile, args.data)).prompt_text(Target(dialogue, turn)))
        return 0
    name = METRIC_MODELS[args.model]
    metric = metric_class(name).from_scoring(profile.scoring, MetricContext())
    if metric is None:
        raise ConfigError(f"model: the profile configures no {name} model", field=f"scoring.metrics.{name}")
    candidate = args.candidate if args.candidate is not None else dialogue.turns[turn].content
    print(metric.prompt(ScoreItem(dialogue, turn, candidate)))
    return 0


def register(sub) -> None:
    prompt = sub.add_parser("prompt", help="show what a model receives")
    psub = prompt.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND", parser_class=type(prompt))
    p = psub.add_parser("show", help="print the exact prompt of a simulator or a metric model for one turn")
    add_profile(p)
    p.add_argument("--simulator", help="simulator name (see simhub serve's /models, or baseline:..., reference:...)")
    p.add_argument("--model", choices=sorted(METRIC_MODELS), help="a metric model's prompt instead of a simulator's")
    p.add_argument("--data", required=True, help="dialogues (JSONL)")
    p.add_argument("--dialogue", required=True, help="dialogue id")
    p.add_argument("--turn", type=int, required=True, help="index of the student turn (0-based, as turn_index)")
    p.add_argument("--candidate", help="the simulated text a metric model scores (default: the real turn)")
    p.add_argument("--training", action="store_true", help="print the training form instead")
    p.set_defaults(handler=_show)
