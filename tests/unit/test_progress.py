"""simhub's progress bars (simhub.progress): redrawn in place on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io

from simhub.progress import LOG_INTERVAL_S, tqdm


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_bar_in_a_log_is_lines_not_carriage_return_frames():
    log = io.StringIO()
    bar = tqdm(total=500, desc="simulate tiny-student-sft", unit="turn", file=log)
    for _ in range(500):
        bar.update(1)
    bar.close()
    text = log.getvalue()
    assert "\r" not in text and text.endswith("\n")
    lines = text.splitlines()
    # updates closer together than LOG_INTERVAL_S write nothing: the first line and the last one
    assert LOG_INTERVAL_S >= 10 and len(lines) == 2
    assert lines[0].startswith("simulate tiny-student-sft: 0/500 turn [")
    assert lines[-1].startswith("simulate tiny-student-sft: 500/500 turn [")


def test_a_disabled_bar_writes_nothing_and_a_terminal_gets_tqdms_own_bar():
    log = io.StringIO()
    bar = tqdm(total=3, desc="x", file=log, disable=True)
    bar.update(3)
    bar.close()
    assert log.getvalue() == ""
    terminal = _Terminal()
    bar = tqdm(total=3, desc="generate", file=terminal)
    bar.update(3)
    bar.close()
    assert "\r" in terminal.getvalue() and "3/3" in terminal.getvalue()
