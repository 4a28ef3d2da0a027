"""ROUGE-L F-measure, value-identical to ``rouge_score`` and much faster on batches.

Definition (Lin, 2004, as implemented by ``rouge_score`` 0.1.2 with the default tokenizer and
``use_stemmer=False``):

* Tokenisation: lowercase with :meth:`str.lower`, replace every run of characters outside
  ``[a-z0-9]`` with a space, split on whitespace and drop empty tokens. Only ASCII letters and
  digits survive, so accented letters, CJK, emoji and punctuation all act as separators.
* With ``L = LCS(reference_tokens, candidate_tokens)`` (longest common subsequence, tokens
  compared for equality), ``precision = L / len(candidate)``, ``recall = L / len(reference)`` and
  ``F = 2 * precision * recall / (precision + recall)``, or ``0.0`` when ``precision + recall`` is
  0. If either side has no tokens, F is 0.

The float operations are performed exactly as ``rouge_score`` performs them (same operands, same
order), so the results are bit-identical, not merely close.

Why bit-parallel: ``rouge_score`` fills the full ``(m + 1) x (n + 1)`` dynamic-programming table
with one Python-level operation per cell, which is O(m*n) interpreter work and dominates the cost
even for short utterances. The bit-vector LCS algorithm (Allison & Dix 1986; Crochemore et al.
2001; Hyyrö 2004) packs a whole row of the DP table (as its 0/1 steps) into one integer and advances it with a handful of
word-parallel operations per token of the other sequence. Python's arbitrary-precision integers
make the packing free of any length limit, so the interpreter does O(m + n) work and the
remaining O(m*n/30) work happens inside CPython's C big-integer routines. Batches additionally
cache tokenisation and the per-reference match masks, because the same reference (e.g. the
gold tutor/student turn) is typically scored against many candidates.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

__all__ = ["lcs_length", "rouge_l", "rouge_l_batch", "tokenize"]

# rouge_score does sub(r"[^a-z0-9]+" -> " "), splits on whitespace and keeps the tokens matching
# ^[a-z0-9]+$, i.e. exactly the maximal runs of ASCII letters/digits in the lowercased text.
# Lowercasing must come first: some non-ASCII characters lowercase to ASCII (KELVIN SIGN -> "k",
# "İ" -> "i" + combining dot) and rouge_score keeps those. Every character that is still non-ASCII
# afterwards is a separator, so encoding with errors="replace" (one b"?" per code point, lone
# surrogates included) followed by a 256-entry bytes.translate and bytes.split() yields the same
# tokens, about twice as fast as re.findall; tokenisation is the largest cost in a batch.
_ASCII_ALNUM = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789")
# Also folds A-Z to a-z: for pure-ASCII text that is all str.lower() does, so the common case can
# skip lower() entirely.
_SEPARATE_AND_FOLD = bytes(
    c if c in _ASCII_ALNUM else c + 32 if 0x41 <= c <= 0x5A else 0x20 for c in range(256)
)

# Match masks of one sequence: token -> bit set of the positions where it occurs.
_Masks = dict[Hashable, int]


def _token_bytes(text: str) -> list[bytes]:
    if text.isascii():
        return text.encode("ascii").translate(_SEPARATE_AND_FOLD).split()
    return text.lower().encode("ascii", "replace").translate(_SEPARATE_AND_FOLD).split()


def tokenize(text: str) -> list[str]:
    """Tokenise ``text`` exactly like ``rouge_score``'s default tokenizer without stemming."""
    return [tok.decode("ascii") for tok in _token_bytes(text)]


def _match_masks(seq: Sequence[Hashable]) -> _Masks:
    masks: _Masks = {}
    get = masks.get
    for i, tok in enumerate(seq):
        masks[tok] = get(tok, 0) | (1 << i)
    return masks


def _lcs_from_masks(masks: _Masks, length: int, other: Sequence[Hashable]) -> int:
    """LCS length between the sequence summarised by ``masks`` (``length`` items) and ``other``.

    Hyyrö's (2004) formulation of the bit-vector LCS. After processing a prefix of ``other``, bit
    ``i`` of ``V`` is 0 exactly when the DP row for that prefix steps up by one at position ``i``
    of the masked sequence, so the number of zero bits among the low ``length`` bits is the LCS of
    the prefix. ``V`` starts as all ones (the empty prefix has LCS 0) and each token with match
    mask ``M`` applies ``U = V & M; V = (V + U) | (V - U)``.
    """
    full = (1 << length) - 1
    v = full
    # A token absent from the other sequence leaves V unchanged; skipping it saves the big-int
    # work. Masks are never 0, so a falsy lookup means "absent"; map(dict.get) stays in C.
    for match in map(masks.get, other):
        if match:
            u = v & match
            # U's bits are a subset of V's, so V - U never borrows, and the carries of V + U only
            # move upwards: bits above `length` never affect the low ones, so mask once at the end.
            v = (v + u) | (v - u)
    return length - (v & full).bit_count()


def lcs_length(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Length of the longest common subsequence of ``a`` and ``b`` (items compared with ``==``)."""
    if not a or not b:
        return 0
    return _lcs_from_masks(_match_masks(a), len(a), b)


def _fmeasure(lcs: int, n_reference: int, n_candidate: int) -> float:
    # Mirrors rouge_scorer._score_lcs and scoring.fmeasure operation for operation: changing the
    # association (e.g. 2 * (p * r), or computing 2L / (m + n)) can flip the last bit.
    precision = lcs / n_candidate
    recall = lcs / n_reference
    if precision + recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.0


def rouge_l(reference: str, candidate: str) -> float:
    """ROUGE-L F-measure of ``candidate`` against ``reference``.

    Equal to ``RougeScorer(["rougeL"]).score(target=reference, prediction=candidate)["rougeL"]
    .fmeasure``, returned as a float (``rouge_score`` returns the int ``0`` for empty inputs).
    """
    ref_tokens = _token_bytes(reference)
    cand_tokens = _token_bytes(candidate)
    if not ref_tokens or not cand_tokens:
        return 0.0
    lcs = _lcs_from_masks(_match_masks(ref_tokens), len(ref_tokens), cand_tokens)
    return _fmeasure(lcs, len(ref_tokens), len(cand_tokens))


def rouge_l_batch(references: Sequence[str], candidates: Sequence[str]) -> list[float]:
    """ROUGE-L F-measure for each ``(references[i], candidates[i])`` pair.

    Same values as :func:`rouge_l`; repeated strings are tokenised (and, for references, turned
    into match masks) only once per call.

    Raises:
        ValueError: if the two sequences have different lengths.
    """
    n_refs, n_cands = len(references), len(candidates)
    if n_refs != n_cands:
        raise ValueError(
            f"references and candidates must have the same length, "
            f"got {n_refs} references and {n_cands} candidates"
        )

    # The caches live only for this call, so memory stays bounded by the batch itself.
    # Reference entry: (token -> match mask, token count, all-ones mask of that width).
    ref_cache: dict[str, tuple[_Masks, int, int]] = {}
    cand_cache: dict[str, list[bytes]] = {}
    ref_get = ref_cache.get
    cand_get = cand_cache.get
    scores: list[float] = []
    append = scores.append
    # _lcs_from_masks and _fmeasure are inlined below: for typical ~10-token utterances the
    # function-call overhead is a sizeable share of the per-pair cost.
    for reference, candidate in zip(references, candidates, strict=True):
        ref_entry = ref_get(reference)
        if ref_entry is None:
            ref_tokens = _token_bytes(reference)
            n = len(ref_tokens)
            ref_entry = ref_cache[reference] = (_match_masks(ref_tokens), n, (1 << n) - 1)
        cand_tokens = cand_get(candidate)
        if cand_tokens is None:
            cand_tokens = cand_cache[candidate] = _token_bytes(candidate)

        masks, n_ref, full = ref_entry
        n_cand = len(cand_tokens)
        if n_ref == 0 or n_cand == 0:
            append(0.0)
            continue
        v = full
        for match in map(masks.get, cand_tokens):
            if match:
                u = v & match
                v = (v + u) | (v - u)
        lcs = n_ref - (v & full).bit_count()
        precision = lcs / n_cand
        recall = lcs / n_ref
        if precision + recall > 0:
            append(2 * precision * recall / (precision + recall))
        else:
            append(0.0)
    return scores


# ---------------------------------------------------------------------------------- the metric

from simhub.metrics.base import Metric, MetricResult, Output, ScoreItem  # noqa: E402


class RougeL(Metric):
    """``rouge_l``: ROUGE-L F-measure of the simulated turn against the real one (no model).

    >>> rouge_l("the cat sat", "the cat")  # LCS 2: precision 1, recall 2/3
    0.8
    >>> rouge_l("8/5", "")  # no tokens on one side
    0.0
    """

    outputs = (Output("rouge_l", "ROUGE-L F-measure (rouge_score tokenisation, no stemming)", "never",
                      label="ROUGE-L"),)
    needs_dialogue = False

    def score(self, items: Sequence[ScoreItem]) -> list[MetricResult]:
        values = rouge_l_batch([it.real.content for it in items], [it.candidate for it in items])
        return [MetricResult({"rouge_l": float(v)}) for v in values]
