"""simhub: the model hub and scoring API for simulated students in tutoring dialogues."""

from simhub.schema import ACTS, Dialogue, Persona, Question, SchemaError, Turn


def _package_version() -> str:
    """The installed distribution's version: pyproject.toml is the one place a release number is written.

    A source tree used without ``pip install`` has no metadata; its pyproject.toml is read then, so
    ``--version``, run files and cache keys still agree with what the tree would install as.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("simhub")
    except PackageNotFoundError:
        pass
    import tomllib
    from pathlib import Path

    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return "0+unknown"
    return str(project["version"]) if project.get("name") == "simhub" and "version" in project else "0+unknown"


__version__ = _package_version()
__all__ = ["ACTS", "Dialogue", "Persona", "Question", "SchemaError", "Turn", "__version__"]
