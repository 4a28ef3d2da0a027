"""The generated command-line reference (docs/reference/cli.md) and the page each command's help names."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from simhub.cli import CLI_REFERENCE, COMMAND_DOCS, build_parser
from simhub.cli.reference import CLI_PAGE, cli_markdown, walk

REPO = Path(__file__).resolve().parents[2]


def test_the_reference_page_is_what_the_parsers_give():
    """A flag added, removed or reworded without `python scripts/gen_reference.py` fails here."""
    assert (REPO / CLI_PAGE).read_text(encoding="utf-8") == cli_markdown(), \
        "docs/reference/cli.md is out of date: run python scripts/gen_reference.py"
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_reference.py"), "--check"], cwd=REPO,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_the_reference_lists_every_command_and_option():
    page = cli_markdown()
    commands = list(walk(build_parser()))
    assert len(commands) > 30
    for prog, parser in commands:
        assert f"`{prog}`" in page, prog
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}`" in page, (prog, flag)
    assert "| `--metrics` |" in page and "95% CIs" in page and "%%" not in page


def test_every_command_s_help_ends_with_the_page_that_documents_it():
    top = build_parser()
    (sub,) = [a for a in top._actions if a.__class__.__name__ == "_SubParsersAction"]
    assert set(COMMAND_DOCS) == set(sub.choices)  # every command has its page
    for name, parser in sub.choices.items():
        page = COMMAND_DOCS[name]
        assert " ".join(parser.format_help().split()).endswith(f"every option of every command: {CLI_REFERENCE}."), name
        path, _, section = page.partition(", ")
        assert (REPO / path.split(" ")[0]).is_file(), page
        assert path.startswith("docs/"), page  # a page of the documentation site
        if section:  # a section of that page: its heading starts with the quoted words
            headings = re.findall(r"^#{1,3} (.+)$", (REPO / path.split(" ")[0]).read_text(encoding="utf-8"), re.M)
            words = section.strip('"')
            assert any(h.startswith(words) for h in headings), (name, words)
    assert " ".join(top.format_help().split()).endswith("where it deviates: FIDELITY.md.")


def test_the_metric_cards_are_what_the_metrics_declare():
    """docs/reference/metrics.md: one card per output of every built-in metric, from its declared
    metadata (a metric's range, direction or null rule changed without regenerating the page fails)."""
    from simhub.metrics import metric_class
    from simhub.metrics.cards import METRICS_PAGE, metrics_markdown
    from simhub.metrics.registry import BUILTIN_METRICS

    page = metrics_markdown()
    assert (REPO / METRICS_PAGE).read_text(encoding="utf-8") == page
    names = [o.name for m in BUILTIN_METRICS for o in metric_class(m).outputs]
    assert names == ["acts", "correctness", "errors", "knowledge", "cosine", "rouge_l", "tutor_response"]
    for name in names:
        assert f"(`{name}`)" in page and f"--metrics {name} " in page
    rouge = page.split("(`rouge_l`)")[1].split("\n## ")[0]
    assert "- **Needs:** no model (text only)" in rouge and "- **Null when:** never" in rouge
    assert "- **Range:** [-1, 1]" in page.split("(`cosine`)")[1].split("\n## ")[0]


def test_the_key_reference_lists_every_profile_and_recipe_key_with_its_meaning():
    """docs/reference/config.md: every field of every profile section and of a recipe, with its type,
    default and a meaning (a key added without one fails here)."""
    from simhub.cli.pages import config_markdown
    from simhub.config import Profile
    from simhub.structdoc import nested_structs, struct_rows
    from simhub.training.config import TrainRecipe

    page = config_markdown()
    for root in (Profile, TrainRecipe):
        for struct in nested_structs(root):
            assert f"### `{struct.__name__}`" in page
            for row in struct_rows(struct):
                assert row.doc, f"{struct.__name__}.{row.name} has no #: comment or description"
                assert f"| `{row.name}` |" in page
    limits = page.split("### `Limits`")[1].split("### ")[0]
    assert "| `max_items` | int | `64` | Items per `POST /score` request (400 above it). |" in limits
    assert "| `kv_cache_memory_bytes` | int \\| null | `null` |" in page


def test_the_run_file_reference_names_every_file_version_and_field():
    from simhub import runformat
    from simhub.cli.pages import run_files_markdown
    from simhub.tutoring.knowsim.results import RESULTS_VERSION

    page = run_files_markdown()
    assert "| `results.json` | `simhub eval` | [`EvalResults`](#evalresults) | 1 | 0, 1 |" in page
    assert f"[`BenchResults`](#benchresults) | {RESULTS_VERSION} |" in page
    for field in ("dialogue_id", "turn_index", "candidate", "finish_reason", "end_of_dialogue"):
        assert f"| `{field}` |" in page.split("### `SimulationLine`")[1].split("### ")[0]
    assert runformat.SimulationLine.__name__ in page


def test_the_http_reference_lists_every_route_of_the_app():
    from simhub.cli.pages import http_markdown, openapi_document

    doc = openapi_document()
    page = http_markdown(doc)
    for path, item in doc["paths"].items():
        for method in item:
            if method in ("get", "post"):
                assert f"### `{method.upper()} {path}`" in page
    assert "| 413 | body too large | [ErrorResponse](#errorresponse) |" in page
    assert "### ScoreRequest {#scorerequest}" in page
