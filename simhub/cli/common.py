"""What the command modules share: loading and provisioning a profile, reading dialogues."""

from __future__ import annotations

import argparse

from simhub.config import Profile


def add_profile(p: argparse.ArgumentParser, default: str = "demo") -> None:
    p.add_argument("--profile", default=default, help=f"profile name or YAML path (default: {default})")


def profile_for(args: argparse.Namespace, *, metrics: list[str] | None = None, simulators: list[str] | None = None,
                tutors: list[str] | None = None, loaded: Profile | None = None) -> Profile:
    """The command's profile, with the models it needs (and only those) built. ``loaded``: the
    profile ``args.profile`` names, when the command has read it already."""
    from simhub.config import load_profile
    from simhub.provision import provision_profile, restrict

    profile = loaded if loaded is not None else load_profile(args.profile)
    if simulators:  # unknown names are reported against the whole profile, before it is narrowed
        from simhub.errors import UnknownNameError
        from simhub.simulation import simulator_names

        known = simulator_names(profile)
        for name in simulators:
            if name not in known:
                raise UnknownNameError("simulator", name, known, field="simulator")
    return provision_profile(restrict(profile, metrics=metrics, simulators=simulators, tutors=tutors))


def metric_list(text: str | None) -> list[str] | None:
    if not text:
        return None
    from simhub.metrics import check_metric_names

    return check_metric_names([m.strip() for m in text.split(",") if m.strip()], "metrics")


def metric_models(metrics: list[str] | None) -> list[str] | None:
    """The registry names (model entries) behind output names, for :func:`simhub.provision.restrict`."""
    if metrics is None:
        return None
    from simhub.metrics import outputs

    table = outputs()
    return sorted({table[m][0].config_key for m in metrics if table[m][0].config_key})
