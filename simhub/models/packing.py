"""Packed scoring: one forward pass for a shared context and several continuations.

The sequence is the context followed by one segment per continuation. A 4-D additive attention
mask lets the context attend causally to itself and each segment attend to the whole context and
causally to itself, never to another segment; position ids of every segment restart at
``len(context)``. Each segment thus sees exactly what it would see alone after the context, so
packed scores equal separate ones while the context is encoded once. The knowledge metric packs
its KC questions this way, and label scoring (acts, the local judge) packs the candidate labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simhub.errors import require


@dataclass(frozen=True)
class PackedPrompt:
    """A shared context followed by segments that each see the context and themselves only."""

    input_ids: list[int]
    context_len: int
    #: ``(start, end)`` token span of each segment in ``input_ids``.
    segments: list[tuple[int, int]]

    @property
    def readout(self) -> list[int]:
        """Positions whose next-token logits give each segment's answer (last token of a segment)."""
        return [end - 1 for _, end in self.segments]


# ---------------------------------------------------------------------------------- prefix trees


@dataclass(frozen=True)
class Node:
    """Tokens ``[start, end)`` of a packed row, seeing ``visible`` ranges plus themselves causally."""

    start: int
    end: int
    first_position: int
    visible: tuple[tuple[int, int], ...]


@dataclass
class PackedRows:
    """Sequences packed into rows as prefix trees; ``chains[i]`` locates sequence ``i``."""

    rows: list[list[int]]
    nodes: list[list[Node]]
    #: For each sequence: (row, ranges of packed positions holding its tokens, in order).
    chains: list[tuple[int, tuple[tuple[int, int], ...]]]

    def positions(self, seq: int, token_indices: Sequence[int]) -> tuple[int, list[int]]:
        """Row and packed positions of the given token indices of sequence ``seq``."""
        row, ranges = self.chains[seq]
        flat: list[int] = []
        for start, end in ranges:
            flat.extend(range(start, end))
        return row, [flat[t] for t in token_indices]


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _truncate(ranges: tuple[tuple[int, int], ...], k: int) -> tuple[tuple[int, int], ...]:
    out, left = [], k
    for start, end in ranges:
        if left <= 0:
            break
        take = min(end - start, left)
        out.append((start, start + take))
        left -= take
    return tuple(out)


def pack_prefix_trees(seqs: Sequence[Sequence[int]], row_tokens: int = 2048) -> PackedRows:
    """Pack sequences so that a shared prefix is stored (and encoded) once.

    Sequences are sorted; each one reuses the longest prefix it shares with its sorted predecessor
    (the longest it shares with any earlier sequence) and adds only its remaining tokens as a
    node that attends to that prefix and causally to itself, with positions continuing from the
    prefix length. Every token therefore sees exactly its own sequence's history: the hidden
    states equal those of the sequence run alone. Turns of one dialogue, the labels of one act
    prompt and the KCs of one knowledge prompt all share long prefixes, so this removes most of
    the compute of scoring them one by one. A row holds about ``row_tokens`` tokens.
    """
    order = sorted(range(len(seqs)), key=lambda i: list(seqs[i]))
    rows: list[list[int]] = []
    nodes: list[list[Node]] = []
    chains: list[tuple[int, tuple[tuple[int, int], ...]] | None] = [None] * len(seqs)
    prev: int | None = None
    for i in order:
        seq = list(seqs[i])
        k = 0
        if prev is not None:
            k = _lcp(seqs[prev], seq)
            if rows and len(rows[-1]) + len(seq) - k > max(row_tokens, len(seq)) and k < len(seq):
                k = -1  # start a new row
        if prev is None or k < 0:
            rows.append([])
            nodes.append([])
            k = 0
            prefix: tuple[tuple[int, int], ...] = ()
        else:
            prefix = _truncate(chains[prev][1], k)  # type: ignore[index]
        row = len(rows) - 1
        tail = seq[k:]
        if tail:
            start = len(rows[row])
            rows[row].extend(tail)
            nodes[row].append(Node(start, start + len(tail), k, prefix))
            chains[i] = (row, (*prefix, (start, start + len(tail))))
        else:
            chains[i] = (row, prefix)
        prev = i
    return PackedRows(rows=rows, nodes=nodes, chains=chains)  # type: ignore[arg-type]


def collate_rows(packed: PackedRows, row_ids: Sequence[int], pad_id: int, dtype, device: str | None = None) -> dict:
    """Right-padded ``input_ids``, the 4-D additive ``attention_mask`` and ``position_ids`` of rows.

    The mask is float with 0 where attention is allowed and ``finfo(dtype).min`` where it is
    blocked (transformers passes a 4-D mask through unchanged). Padding tokens attend only to
    themselves: a fully blocked row would turn into NaN in the softmax, and NaN hidden states
    can leak into real rows through some kernels even though real rows never attend to padding.
    """
    torch = require("torch", "metrics")
    width = max(len(packed.rows[r]) for r in row_ids)
    n = len(row_ids)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    positions = torch.zeros((n, width), dtype=torch.long)
    allowed = torch.zeros((n, width, width), dtype=torch.bool)
    for b, r in enumerate(row_ids):
        tokens = packed.rows[r]
        ids[b, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        for node in packed.nodes[r]:
            span = node.end - node.start
            for start, end in node.visible:
                allowed[b, node.start : node.end, start:end] = True
            allowed[b, node.start : node.end, node.start : node.end] = torch.ones((span, span), dtype=torch.bool).tril()
            positions[b, node.start : node.end] = torch.arange(node.first_position, node.first_position + span)
        pad = torch.arange(len(tokens), width)
        allowed[b, pad, pad] = True
    allowed = allowed.to(device) if device else allowed
    mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return {"input_ids": ids.to(allowed.device), "attention_mask": mask[:, None], "position_ids": positions.to(allowed.device)}


def collate_packed(prompts: Sequence[PackedPrompt], pad_id: int, dtype, device: str | None = None) -> dict:
    """Model inputs for context-plus-segments prompts (one prompt a row): the context is a causal
    node, every segment a node that sees the whole context, positions restarting after it."""
    rows = [list(p.input_ids) for p in prompts]
    nodes = [
        [Node(0, p.context_len, 0, ()), *(Node(s, e, p.context_len, ((0, p.context_len),)) for s, e in p.segments)]
        for p in prompts
    ]
    return collate_rows(PackedRows(rows=rows, nodes=nodes, chains=[]), range(len(prompts)), pad_id, dtype, device)
