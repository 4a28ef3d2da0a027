"""Evaluation workflows: simulated students to Table-1 rows with confidence intervals, comparisons,
reports, and dialogue-level realism."""
