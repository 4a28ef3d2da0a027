"""Agreement between two raters' labels, shared by the annotation checks (`simhub annotate
--compare`) and the human evaluation (`simhub human-eval`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's κ of two paired label sequences, (p_o − p_e) / (1 − p_e) over the categories either
    uses, with p_e from each rater's own label shares (scikit-learn's ``cohen_kappa_score`` without
    ``labels``); None when there is nothing to compare or p_e = 1 (both use one and the same
    category throughout).

    >>> cohen_kappa(["a", "a", "b", "b"], ["a", "a", "a", "b"])
    0.5
    """
    if len(a) != len(b):
        raise ValueError("the two label sequences differ in length")
    n = len(a)
    if n == 0:
        return None
    observed = sum(x == y for x, y in zip(a, b, strict=True)) / n
    count_a, count_b = Counter(a), Counter(b)
    expected = sum(count_a[label] * count_b[label] for label in count_a) / (n * n)
    if expected >= 1.0:
        return None
    return (observed - expected) / (1.0 - expected)
