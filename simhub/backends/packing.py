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



def collate_packed(prompts: Sequence[PackedPrompt], pad_id: int, dtype, device: str | None = None) -> dict:
    """Right-padded ``input_ids``, the 4-D additive ``attention_mask`` and ``position_ids`` of a batch.

    The mask is float with 0 where attention is allowed and ``finfo(dtype).min`` where it is
    blocked (transformers passes a 4-D mask through unchanged). Padding tokens attend only to
    themselves: a fully blocked row would turn into NaN in the softmax, and NaN hidden states
    can leak into real rows through some kernels even though real rows never attend to padding.
    """
    torch = require("torch", "metrics")
    width = max(len(p.input_ids) for p in prompts)
    n = len(prompts)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    positions = torch.zeros((n, width), dtype=torch.long)
    allowed = torch.zeros((n, width, width), dtype=torch.bool)
    for row, p in enumerate(prompts):
        length, c = len(p.input_ids), p.context_len
        ids[row, :length] = torch.tensor(p.input_ids, dtype=torch.long)
        allowed[row, :c, :c] = torch.ones((c, c), dtype=torch.bool).tril()
        positions[row, :c] = torch.arange(c)
        for start, end in p.segments:
            span = end - start
            allowed[row, start:end, :c] = True
            allowed[row, start:end, start:end] = torch.ones((span, span), dtype=torch.bool).tril()
            positions[row, start:end] = torch.arange(c, c + span)
        pad = torch.arange(length, width)
        allowed[row, pad, pad] = True
    allowed = allowed.to(device) if device else allowed
    mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return {
        "input_ids": ids.to(allowed.device),
        "attention_mask": mask[:, None],
        "position_ids": positions.to(allowed.device),
    }
