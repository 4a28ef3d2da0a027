"""The generated reference pages besides the command line and the metric cards: every profile and
recipe key (``docs/reference/config.md``), every run file and its version (``docs/reference/run-files.md``)
and the HTTP API (``docs/reference/http.md``, from the service's OpenAPI document).

Each page is a function of the code (the msgspec structs, their ``#:`` comments and descriptions, the
app's OpenAPI document), so it cannot drift: ``python scripts/gen_reference.py`` writes them and a test
fails when one is stale.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from simhub.structdoc import first_paragraph, nested_structs, struct_rows

CONFIG_PAGE = "docs/reference/config.md"
RUN_FILES_PAGE = "docs/reference/run-files.md"
HTTP_PAGE = "docs/reference/http.md"
OPENAPI_FILE = "docs/reference/openapi.json"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _anchor(cls: type) -> str:
    return cls.__name__.lower().lstrip("_")


def struct_table(cls: type, known: Iterable[type]) -> list[str]:
    """A struct as a section: its docstring's first paragraph, then one row per field. A field whose
    type is another struct of ``known`` links to that struct's section."""
    names = {k.__name__: _anchor(k) for k in known}
    lines = [f"### `{cls.__name__}` {{#{_anchor(cls)}}}", ""]
    about = first_paragraph(cls.__doc__)  # a struct without a docstring has an empty one
    if about:
        lines += [about, ""]
    lines += ["| key | type | default | meaning |", "|---|---|---|---|"]
    for row in struct_rows(cls):
        kind = _cell(row.type)
        for name, anchor in names.items():
            if name in row.type:
                kind = kind.replace(name, f"[{name}](#{anchor})")
        lines.append(f"| `{row.name}` | {kind} | `{_cell(row.default)}` | {_cell(row.doc)} |")
    return [*lines, ""]


def _sections(root: type) -> list[str]:
    structs = nested_structs(root)
    return [line for cls in structs for line in struct_table(cls, structs)]


def config_markdown() -> str:
    """Every key of a profile (``simhub.config.Profile``) and of a training recipe
    (``simhub.training.config.TrainRecipe``)."""
    from simhub.config import Profile
    from simhub.training.config import TrainRecipe

    out = ["# Profile and recipe keys", "",
           "Generated from the msgspec structs that parse them (`simhub.config`, `simhub.training.config`) by "
           "`python scripts/gen_reference.py`; a test fails when a key changes and this page was not regenerated. "
           "An unknown key is an error naming its YAML path and the closest known key. The guide is "
           "[Profiles](../guides/profiles.md); recipes are in [Train and publish](../guides/train-publish.md).", "",
           "## Profiles", "",
           "A profile is YAML; `extends:` starts from a shipped profile (`demo`, `demo-smol`, `paper-8b`) or a "
           "path. Where a section below is a model reference, a bare string stands for `{model: STRING}`. "
           "Every command takes `--profile NAME_OR_PATH`.", "",
           *_sections(Profile),
           "## Training recipes", "",
           "A recipe is YAML (`simhub train NAME_OR_PATH`); `--set key=value` overrides one key (dotted keys reach "
           "`dpo.`). The shipped recipes are in `simhub/resources/recipes/`.", "",
           *_sections(TrainRecipe)]
    return "\n".join(out).rstrip() + "\n"


def _run_files() -> list[tuple[str, str, type, int, tuple[int, ...]]]:
    """(file, written by, struct, version written, versions read) for every versioned run file."""
    from simhub import runformat as rf
    from simhub.tutoring import report as kit
    from simhub.tutoring import runner
    from simhub.tutoring.knowsim import results, trace
    from simhub.tutoring.lms import bench as kt_bench
    from simhub.tutoring.lms import results as kt_results
    from simhub.versions import RUN_FORMAT_READS, RUN_FORMAT_VERSION

    run = (RUN_FORMAT_VERSION, RUN_FORMAT_READS)
    return [
        (rf.RESULTS_FILE, "`simhub eval`", rf.EvalResults, *run),
        (rf.SCORES_FILE, "`simhub eval` (one line per student turn)", rf.ScoreLine, *run),
        (rf.SIMULATIONS_FILE, "`simhub eval`, `simhub simulate` (one line per student turn)", rf.SimulationLine, *run),
        (rf.DIALOGUE_RESULTS_FILE, "`simhub eval-dialogues`", rf.DialogueLevelResults, *run),
        (rf.ROLLOUTS_FILE, "`simhub rollout` (one dialogue per line)", rf.RolloutLine, *run),
        (rf.ROLLOUT_SUMMARY_FILE, "`simhub rollout`", rf.RolloutSummary, *run),
        ("run.json", "`simhub tutor-bench` (every learner family)", runner.RunInfo, runner.RUN_VERSION,
         runner.RUN_READS),
        ("traces/*.json", "`simhub tutor-bench` (knowledge-state learner: one per conversation)", trace.Trace,
         trace.TRACE_VERSION, trace.TRACE_READS),
        ("results.json", "`simhub tutor-bench` (knowledge-state learner)", results.BenchResults,
         results.RESULTS_VERSION, results.RESULTS_READS),
        ("traces/*.json", "`simhub tutor-bench --learner kt-learner` (one per run)", kt_bench.KTRunTrace,
         kt_bench.KT_TRACE_VERSION, kt_bench.KT_TRACE_READS),
        ("results.json", "`simhub tutor-bench --learner kt-learner`", kt_results.KTBenchResults,
         kt_results.KT_RESULTS_VERSION, kt_results.KT_RESULTS_READS),
        ("results.json", "`simhub tutor-bench` (a learner family summarised by the kit)", kit.KitResults,
         kit.KIT_RESULTS_VERSION, (kit.KIT_RESULTS_VERSION,)),
    ]


def run_files_markdown() -> str:
    """Every run file simhub writes: its struct, the version written and the versions read, every field."""
    files = _run_files()
    out = ["# Run files", "",
           "Generated from the structs that write and read them by `python scripts/gen_reference.py`. Every file "
           "starts with `schema_version` (every line of a JSONL file carries it); a file of a version not read "
           "here is refused with a message naming the file and its version. How the versions evolve: "
           "[The run directory](../run-format.md).", "",
           "| file | written by | struct | version written | versions read |", "|---|---|---|---|---|"]
    out += [f"| `{name}` | {writer} | [`{cls.__name__}`](#{_anchor(cls)}) | {version} | "
            f"{', '.join(map(str, reads))} |" for name, writer, cls, version, reads in files]
    out.append("")
    seen: list[type] = []
    for _, _, cls, _, _ in files:
        for struct in nested_structs(cls):
            if struct not in seen:
                seen.append(struct)
    out += ["## Fields", ""]
    for struct in seen:
        out += struct_table(struct, seen)
    return "\n".join(out).rstrip() + "\n"


# ------------------------------------------------------------------------------------------- HTTP


def openapi_document() -> dict[str, Any]:
    """The service's OpenAPI document for the demo profile, with the shipped limits (no environment)."""
    from simhub.config import load_profile
    from simhub.serving.app import create_app
    from simhub.serving.settings import ServiceSettings

    profile = load_profile("demo")
    app = create_app(ServiceSettings.load(profile, environ={}), profile)
    return app.openapi_schema.to_schema()


def _schema_type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    for key in ("oneOf", "anyOf", "allOf"):
        if key in schema:
            return " \\| ".join(_schema_type(s) for s in schema[key])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        return " \\| ".join(kind)
    if kind == "array":
        return f"array of {_schema_type(schema.get('items', {}))}"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    return kind


def _operation(path: str, method: str, op: dict[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", ""]
    if op.get("summary"):
        lines += [f"**{_cell(op['summary'])}**", ""]
    if op.get("description"):
        lines += [op["description"].strip(), ""]
    params = op.get("parameters", [])
    if params:
        lines += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
        lines += [f"| `{p['name']}` | {p.get('in', '')} | {_schema_type(p.get('schema', {}))} | "
                  f"{'yes' if p.get('required') else 'no'} | {_cell(p.get('description', ''))} |" for p in params]
        lines.append("")
    body = op.get("requestBody", {}).get("content", {})
    for media, content in body.items():
        lines += [f"Request body (`{media}`): {_schema_type(content.get('schema', {}))}", ""]
        lines += _example(content, "Example request")
    responses = op.get("responses", {})
    if responses:
        lines += ["| status | meaning | body |", "|---|---|---|"]
        for code, response in sorted(responses.items()):
            bodies = ", ".join(_schema_type(c.get("schema", {})) for c in response.get("content", {}).values())
            lines.append(f"| {code} | {_cell(response.get('description', ''))} | {bodies} |")
        lines.append("")
        for code in ("200", "201"):
            for content in responses.get(code, {}).get("content", {}).values():
                lines += _example(content, f"Example {code} answer")
    return lines


def _example(content: dict[str, Any], title: str) -> list[str]:
    """The first documented example of a request or response body, as a JSON block."""
    examples = content.get("examples") or {}
    for example in examples.values():
        if "value" in example:
            summary = f" ({example['summary']})" if example.get("summary") else ""
            text = json.dumps(example["value"], indent=2, ensure_ascii=False)
            return [f"{title}{summary}:", "", "```json", text, "```", ""]
    return []


def http_markdown(doc: dict[str, Any] | None = None) -> str:
    """Every operation of the service (method, path, parameters, body, responses) and every schema."""
    doc = doc or openapi_document()
    out = ["# HTTP API", "",
           "Generated from the service's OpenAPI document (the demo profile, shipped limits) by "
           "`python scripts/gen_reference.py`. The document itself: [openapi.json](openapi.json); a running "
           "service serves it at `/schema/openapi.json` and the interactive page at `/schema`. The guide is "
           "[Serve](../guides/serve.md).", "", doc["info"].get("description", "").strip(), "", "## Operations", ""]
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method in ("get", "post", "put", "delete", "patch"):
                out += _operation(path, method, op)
    out += ["## Schemas", ""]
    for name, schema in sorted(doc.get("components", {}).get("schemas", {}).items()):
        out += [f"### {name} {{#{name.lower()}}}", ""]
        if schema.get("description"):
            out += [_cell(schema["description"]), ""]
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        if props:
            out += ["| field | type | required | description |", "|---|---|---|---|"]
            out += [f"| `{key}` | {_schema_type(value)} | {'yes' if key in required else 'no'} | "
                    f"{_cell(value.get('description', ''))} |" for key, value in props.items()]
            out.append("")
        elif "type" in schema or "enum" in schema:
            out += [f"Type: {_schema_type(schema)}", ""]
    return "\n".join(out).rstrip() + "\n"


def openapi_json(doc: dict[str, Any] | None = None) -> str:
    return json.dumps(doc or openapi_document(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def generated_pages() -> dict[str, str]:
    """Every generated reference file (its path in the repository) with the text the code gives now."""
    from simhub.cli.reference import CLI_PAGE, cli_markdown
    from simhub.evaluation.dialogue_level.cards import DIALOGUE_METRICS_PAGE, dialogue_metrics_markdown
    from simhub.metrics.cards import METRICS_PAGE, metrics_markdown

    openapi = openapi_document()
    return {CLI_PAGE: cli_markdown(), METRICS_PAGE: metrics_markdown(),
            DIALOGUE_METRICS_PAGE: dialogue_metrics_markdown(), CONFIG_PAGE: config_markdown(),
            RUN_FILES_PAGE: run_files_markdown(), HTTP_PAGE: http_markdown(openapi), OPENAPI_FILE: openapi_json(openapi)}
