"""Progress bars that suit where they are written.

On a terminal, a progress bar is tqdm's, redrawn in place. Anywhere else (a log file, CI, a pipe,
a captured stream) a redrawn bar is a string of carriage-return frames, so simhub's bars there write
one plain line per update, at most every :data:`LOG_INTERVAL_S` seconds, and a last line when they
end: ``simulate tiny-student-sft: 120/392 turn [00:31<01:10, 3.87turn/s]``. Every bar of simhub's own
comes from :func:`tqdm` here, with tqdm's own arguments.
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Callable
from typing import Any, TextIO

#: Seconds between two lines of a bar written to something that is not a terminal.
LOG_INTERVAL_S = 30.0
#: A bar's line in a log: what, how far, how long, how fast (no bar drawn).
LOG_FORMAT = "{desc}: {n_fmt}/{total_fmt} {unit} [{elapsed}<{remaining}, {rate_fmt}]"

#: Whether training prints its progress (summary lines, trainable parameters, the Trainer's bars and
#: per-step dicts). A service building demo models in a background thread turns it off there, so
#: its log keeps one line per build step; what is trained is the same either way.
VERBOSE: contextvars.ContextVar[bool] = contextvars.ContextVar("simhub_training_verbose", default=True)

#: ``progress(step, max_steps)`` after every optimiser step of a training run in this context (the
#: service reports a build's progress and ETA with it); None: nobody listens.
PROGRESS: contextvars.ContextVar[Callable[[int, int], None] | None] = contextvars.ContextVar(
    "simhub_training_progress", default=None)


def is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class LineWriter:
    """A stream for tqdm that turns its redrawn frames into lines: each frame's text (its carriage
    returns and padding dropped) becomes one line; blank frames (tqdm clearing its line) are dropped."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def write(self, text: str) -> int:
        line = text.replace("\r", "").rstrip()
        if line:
            self.stream.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def tqdm(*args: Any, **kwargs: Any):
    """``tqdm.auto.tqdm(*args, **kwargs)`` on a terminal; elsewhere the same bar written as lines
    (:class:`LineWriter`, at most one every :data:`LOG_INTERVAL_S` seconds, no bar drawn)."""
    from tqdm.auto import tqdm as _tqdm

    stream = kwargs.get("file") or sys.stderr
    if not is_terminal(stream):
        kwargs["file"] = LineWriter(stream)
        kwargs.setdefault("mininterval", LOG_INTERVAL_S)
        kwargs["dynamic_ncols"] = False
        kwargs.setdefault("bar_format", LOG_FORMAT)
    return _tqdm(*args, **kwargs)
