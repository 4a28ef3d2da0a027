"""DPO on packed pairs: a pair's prompt is encoded once for both of its completions.

trl's DPO loss runs a batch of ``[chosen rows; rejected rows]``, each row the prompt followed by
one completion, through the policy and again through the reference adapter. The prompts (up to
512 tokens here) are far longer than the completions (at most 32 new tokens in the demo), so
most of each step encodes the same prompt twice, forwards and backwards.

:func:`install` wraps the log-prob forward trl adds to the model (``fused_lm_head=True``) so that
each pair becomes one row holding a prefix tree (:mod:`simhub.models.packing`): the tokens both
sequences share, then the rest of the chosen sequence, then the rest of the rejected one. Each
branch attends to the shared tokens and causally to itself, never to the other branch, and its
positions go on from the shared length, so every token sees exactly the history it would see in
its own row. The per-token log-probabilities are then put back where trl expects them, so the
loss, the rewards and the gradients are trl's own. Since one position predicts one next token,
the last shared token is stored once per branch (the branches fork one token early).

Anything but a right-padded ``[chosen; rejected]`` batch of input ids (what trl's preference
collator makes) goes to the unpacked forward unchanged.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import TYPE_CHECKING

from simhub.errors import require
from simhub.models.packing import Node, PackedRows, collate_rows

if TYPE_CHECKING:
    from torch import Tensor

IGNORE = -100


@dataclass(frozen=True)
class PackedPairs:
    """Model inputs of packed pairs, and where each original (sequence, position) landed."""

    inputs: dict
    #: ``[rows, width]`` next-token label of every packed position (``-100``: none).
    shift_labels: Tensor
    #: Index tensors: original sequence, original position, packed row, packed position.
    sequence: Tensor
    position: Tensor
    row: Tensor
    packed_position: Tensor


def _fork(a: list[int], b: list[int], la: list[int], lb: list[int]) -> int:
    """Length of the trunk two sequences share: their common (token, label) prefix less one token,
    so that each branch holds its own copy of the token that predicts its first differing one."""
    n = min(len(a), len(b))
    m = 0
    while m < n and a[m] == b[m] and la[m] == lb[m]:
        m += 1
    return max(m - 1, 0)


def pack_pairs(input_ids, attention_mask, labels, dtype) -> PackedPairs | None:
    """Pack a right-padded ``[chosen; rejected]`` batch pairwise; ``None`` if it is not one."""
    torch = require("torch", "train")
    if input_ids.dim() != 2 or attention_mask is None or attention_mask.dim() != 2 or input_ids.size(0) % 2:
        return None
    lengths = attention_mask.sum(dim=1)
    width = input_ids.size(1)
    if not bool((attention_mask == (torch.arange(width, device=attention_mask.device) < lengths[:, None])).all()):
        return None  # not right-padded
    n = input_ids.size(0) // 2
    ids, labs, lens = input_ids.tolist(), labels.tolist(), lengths.tolist()
    rows: list[list[int]] = []
    nodes: list[list[Node]] = []
    shift: list[list[int]] = []
    seq_idx: list[int] = []
    pos_idx: list[int] = []
    row_idx: list[int] = []
    packed_idx: list[int] = []
    for i in range(n):
        pair = (i, n + i)
        seqs = [ids[x][: lens[x]] for x in pair]
        seq_labels = [labs[x][: lens[x]] for x in pair]
        trunk = _fork(seqs[0], seqs[1], seq_labels[0], seq_labels[1])
        tokens = list(seqs[0][:trunk])
        row_nodes = [Node(0, trunk, 0, ())] if trunk else []
        next_labels = list(seq_labels[0][1 : trunk + 1])
        for x, seq, lab in zip(pair, seqs, seq_labels, strict=True):
            start = len(tokens)
            tokens += seq[trunk:]
            row_nodes.append(Node(start, len(tokens), trunk, ((0, trunk),) if trunk else ()))
            next_labels += [*lab[trunk + 1 :], IGNORE]
            # Original position j (its log-prob scores token j + 1) sits at packed position j (trunk)
            # or start + j - trunk (branch); the last token scores nothing.
            for j in range(len(seq) - 1):
                seq_idx.append(x)
                pos_idx.append(j)
                row_idx.append(i)
                packed_idx.append(j if j < trunk else start + j - trunk)
        rows.append(tokens)
        nodes.append(row_nodes)
        shift.append(next_labels)
    inputs = collate_rows(PackedRows(rows=rows, nodes=nodes, chains=[]), range(n), 0, dtype,
                          device=str(input_ids.device))
    packed_width = inputs["input_ids"].size(1)
    shift_labels = torch.full((n, packed_width), IGNORE, dtype=torch.long, device=input_ids.device)
    for i, row in enumerate(shift):
        shift_labels[i, : len(row)] = torch.tensor(row, dtype=torch.long)

    def index(values):
        return torch.tensor(values, dtype=torch.long, device=input_ids.device)

    return PackedPairs(inputs, shift_labels, index(seq_idx), index(pos_idx), index(row_idx), index(packed_idx))


#: Per-token fields of trl's fused output, all laid out like ``log_probs``.
PER_TOKEN = ("log_probs", "entropy", "log_sum_sq_probs", "mean_logits", "is_top1")


def unpack(packed: PackedPairs, values, batch: int, width: int):
    """Packed per-token values laid out as trl's ``[batch, width - 1]`` (zero where no label)."""
    out = values.new_zeros((batch, width - 1))
    return out.index_put((packed.sequence, packed.position), values[packed.row, packed.packed_position])


def install(model) -> None:
    """Wrap the fused log-prob forward trl put on ``model`` (the base causal LM under PEFT)."""
    require("torch", "train")
    from trl.trainer.utils import FusedCausalLMOutput

    if getattr(model, "_simhub_packed_pairs", False):
        return
    fused = model.forward

    def packed_forward(self, *args, fused_lm_head=False, labels=None, **kwargs):
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        plain = (not fused_lm_head or labels is None or input_ids is None or kwargs.get("shift_labels") is not None
                 or kwargs.get("position_ids") is not None or kwargs.get("inputs_embeds") is not None)
        packed = None if plain else pack_pairs(input_ids, kwargs.get("attention_mask"), labels,
                                               next(self.parameters()).dtype)
        if packed is None:
            return fused(*args, fused_lm_head=fused_lm_head, labels=labels, **kwargs)
        kwargs = {k: v for k, v in kwargs.items() if k not in ("input_ids", "attention_mask")}
        outputs = fused(**packed.inputs, **kwargs, shift_labels=packed.shift_labels, fused_lm_head=True)
        fields = {name: None if getattr(outputs, name) is None
                  else unpack(packed, getattr(outputs, name), input_ids.size(0), input_ids.size(1))
                  for name in PER_TOKEN}
        mask = labels[:, 1:] != IGNORE
        return FusedCausalLMOutput(loss=-fields["log_probs"].sum() / mask.sum().clamp(min=1), label_mask=mask,
                                   aux_loss=outputs.aux_loss, **fields)

    model.forward = types.MethodType(packed_forward, model)
    model._simhub_packed_pairs = True
