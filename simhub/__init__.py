"""simhub: the model hub and scoring API for simulated students in tutoring dialogues."""

from simhub.schema import ACTS, Dialogue, Persona, Question, SchemaError, Turn

__version__ = "0.1.0"
__all__ = ["ACTS", "Dialogue", "Persona", "Question", "SchemaError", "Turn", "__version__"]
