"""The paper's human evaluation (its §3.4 and Tables 2–3): rating tasks for people, and how well the
people agree with the metrics, with the LLM annotation and with each other (docs/human-eval.md).

Two steps, each a function:

* :func:`write_tasks` (:mod:`.tasks`) draws student turns of the dialogues (seeded) and writes what
  raters see (:mod:`.sheets`), one *group* per drawn turn: the question, the real history, the real
  student turn and, blinded and shuffled, each ``simhub eval`` run's simulated turn. A separate
  ``key.json`` (not for raters) records which run wrote which candidate, the metrics' values for it
  and the real turn's LLM labels.
* :func:`human_eval_report` (:mod:`.tables`) reads the raters' CSV files (:mod:`.ratings`; one row
  per rated turn per rater) against that key and computes the human-evaluated scores of each run
  (Table 2) and the agreements of Table 3: Cohen's κ (Pearson's r for linguistic similarity)
  human–metric, human–label, human–human. :mod:`.tables` defines every number.

The folder's file names and kinds are in :mod:`.layout`.
"""

from __future__ import annotations

from simhub.evaluation.human_eval.layout import COLUMNS, KEY_FILE, NA, REPORT_FILE, TASKS_KIND
from simhub.evaluation.human_eval.ratings import Rating, load_key, read_ratings
from simhub.evaluation.human_eval.tables import cohen_kappa, format_report, human_eval_report, pearson, write_report
from simhub.evaluation.human_eval.tasks import (
    TaskOptions,
    check_new_tasks_folder,
    check_task_options,
    load_task_runs,
    write_tasks,
)

__all__ = [
    "COLUMNS",
    "KEY_FILE",
    "NA",
    "REPORT_FILE",
    "TASKS_KIND",
    "Rating",
    "TaskOptions",
    "check_new_tasks_folder",
    "check_task_options",
    "cohen_kappa",
    "format_report",
    "human_eval_report",
    "load_key",
    "load_task_runs",
    "pearson",
    "read_ratings",
    "write_report",
    "write_tasks",
]
