"""The files of a human-evaluation tasks folder and the names they share (docs/human-eval.md).

``simhub human-eval tasks`` writes ``key.json`` (for the analyst only), ``items.jsonl``, one
``sheets/RATER.md`` and one ``ratings/RATER.csv`` per rater; ``simhub human-eval report`` reads the
key and the filled-in CSVs and writes ``report.json``.
"""

from __future__ import annotations

TASKS_KIND = "simhub-human-eval-tasks"
REPORT_KIND = "simhub-human-eval-report"
SCHEMA_VERSION = 1
#: The files of a tasks folder.
KEY_FILE = "key.json"
ITEMS_FILE = "items.jsonl"
SHEETS_DIR = "sheets"
RATINGS_DIR = "ratings"
REPORT_FILE = "report.json"
#: The columns of a ratings CSV file, in the order the templates write them.
COLUMNS: tuple[str, ...] = ("item", "rater", "act", "correctness", "same_error", "linguistic")
#: The category of an outcome that does not apply (κ counts it as a category of its own).
NA = "na"
