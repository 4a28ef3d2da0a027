"""The layered library (ARCHITECTURE.md): no import cycles, light imports, nothing of the tests in the package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_no_import_cycles_between_modules():
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("simhub")
    modules = sorted(graph.modules)
    # Tarjan's strongly connected components over module-level imports.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(m: str) -> None:
        index[m] = low[m] = counter[0]
        counter[0] += 1
        stack.append(m)
        on_stack.add(m)
        for n in graph.find_modules_directly_imported_by(m):
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in on_stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            component = []
            while True:
                n = stack.pop()
                on_stack.discard(n)
                component.append(n)
                if n == m:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for m in modules:
        if m not in index:
            visit(m)
    assert not cycles, cycles


def test_no_class_name_is_defined_twice():
    """One name, one meaning: a class name is defined in one module of the package only (two benches once
    each had their own ``Bench``, ``TutorFailure`` and ``Answer``)."""
    import ast
    from collections import defaultdict

    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted((ROOT / "simhub").rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}


def test_the_tutor_bench_kit_stays_small_and_its_command_thin():
    """The kit is at most eight modules outside the family wings, and the command under 200 lines."""
    kit = [p.name for p in (ROOT / "simhub" / "tutoring").glob("*.py")]
    assert len(kit) <= 8, kit
    assert {p.name for p in (ROOT / "simhub" / "tutoring").iterdir() if p.is_dir() and p.name != "__pycache__"} == {
        "knowsim", "lms", "probe"}
    assert len((ROOT / "simhub" / "cli" / "tutoring.py").read_text(encoding="utf-8").splitlines()) < 200


def test_light_imports_do_not_load_torch_or_vllm():
    """`import simhub` and the command line start without the heavy extras (they load when used)."""
    code = ("import sys, simhub, simhub.config, simhub.schema, simhub.data.eedi, simhub.metrics, simhub.scoring, "
            "simhub.simulation, simhub.cli; simhub.cli.build_parser(); "
            "print(sorted(m for m in ('torch', 'transformers', 'vllm', 'litestar', 'openai', 'sentence_transformers') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_package_holds_no_test_doubles_or_generators():
    package = ROOT / "simhub"
    names = {p.name for p in package.rglob("*.py")}
    assert "hub_server.py" not in names and "server_process.py" not in names
    assert not (package / "testing").exists()
    assert not any("generate_sample" in p.read_text() for p in package.rglob("*.py"))
    assert (ROOT / "scripts" / "make_sample.py").is_file()


def test_the_package_reads_nothing_outside_itself():
    """Recipes, profiles, cards and the sample corpus ship as package resources."""
    from simhub.config import PROFILE_DIR, RECIPE_DIR
    from simhub.data.sample import SAMPLE_DIR

    for folder in (PROFILE_DIR, RECIPE_DIR, SAMPLE_DIR):
        assert folder.is_dir() and package_relative(folder)
    for path in (ROOT / "simhub").rglob("*.py"):
        text = path.read_text()
        assert "parents[1]" not in text and "training/recipes" not in text, path


def package_relative(folder: Path) -> bool:
    return (ROOT / "simhub") in folder.resolve().parents
