"""The Scorer: the realism metrics over batches of simulated turns (see :mod:`simhub.scoring.scorer`)."""

from simhub.metrics import ScoreItem, summarize
from simhub.scoring.scorer import ItemResult, Scorer, ScoreResult, apply_candidate_rules, format_summary

__all__ = ["ItemResult", "ScoreItem", "ScoreResult", "Scorer", "apply_candidate_rules", "format_summary", "summarize"]
