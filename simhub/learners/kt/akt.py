"""AKT (Ghosh et al., KDD 2020), EduClaw-Bench's KT backbone, behind simhub's KT interface.

The network is ``pykt.models.akt.AKT`` from ``pykt-toolkit`` 0.0.38, used as it is. Install it with
``pip install --no-deps pykt-toolkit==0.0.38``: the package declares ``wandb`` for its own training
scripts, which simhub does not use. simhub trains the network itself (:func:`fit_akt`) on an
item-response log, and saves it as a JSON file (``backend: akt``, the KC and item vocabularies and the
network's settings) beside a safetensors file of its weights.

AKT is an attention model over the interaction history, so its **belief is the history**: a tuple of
``(kc, item, correct)`` indices, the last ``max_len`` kept. ``update`` appends one answer. To read a
KC, the model is asked about a next question on it: AKT's prediction at step t sees question t and
only the answers before it, so the history plus a query step gives P(correct on that question).
``predict(belief, kc, item)`` uses the item's Rasch difficulty; ``mastery(belief, kc)`` asks with the
reserved item index 0, whose difficulty stays 0 (an item of average difficulty), so mastery is the
model's P(correct) on an average item of the KC. ``masteries`` reads every KC in one batched forward.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from simhub.errors import DataError, MissingExtraError
from simhub.learners.kt.base import KTModel, read_json_object
from simhub.schema import atomic_write_bytes

__all__ = ["AKTBelief", "AKTModel", "AKTSettings", "fit_akt"]

AKT_VERSION = 1


def _akt_class():
    try:
        from pykt.models.akt import AKT
    except ImportError as exc:
        raise MissingExtraError("the AKT backend needs pykt-toolkit: pip install --no-deps pykt-toolkit==0.0.38",
                                field="backend") from exc
    return AKT


@dataclass(frozen=True)
class AKTSettings:
    """The network's size and the training run (all recorded in the saved file)."""

    d_model: int = 64
    n_blocks: int = 1
    heads: int = 4
    d_ff: int = 128
    final_fc_dim: int = 128
    dropout: float = 0.05
    epochs: int = 40
    lr: float = 1e-3
    batch_size: int = 32
    max_len: int = 200
    seed: int = 0

    def network(self) -> dict[str, Any]:
        return {"d_model": self.d_model, "n_blocks": self.n_blocks, "num_attn_heads": self.heads, "d_ff": self.d_ff,
                "final_fc_dim": self.final_fc_dim}


@dataclass(frozen=True)
class AKTBelief:
    """The interaction history: ``(kc index, item index, correct)`` steps, oldest first."""

    steps: tuple[tuple[int, int, int], ...] = ()


class AKTModel(KTModel):
    backend = "akt"

    def __init__(self, net: Any, kcs: Sequence[str], items: Sequence[str], settings: AKTSettings,
                 fit: Mapping[str, Any] | None = None):
        import torch

        self.net = net.eval()
        self._kcs = tuple(kcs)
        self._kc_index = {k: i for i, k in enumerate(self._kcs)}
        #: Item index 0 is reserved for "an item of average difficulty" (never trained).
        self.items = tuple(items)
        self._item_index = {it: i + 1 for i, it in enumerate(self.items)}
        self.settings, self.fit = settings, dict(fit or {})
        self._torch = torch
        self._cache = functools.lru_cache(maxsize=4096)(self._masteries_at)

    @property
    def kcs(self) -> Sequence[str]:
        return self._kcs

    def initial_belief(self) -> AKTBelief:
        return AKTBelief()

    def update(self, belief: AKTBelief, item: Hashable, kc: str, correct: bool) -> AKTBelief:
        step = (self._kc_index[self.check_kc(kc)], self._item_index.get(str(item), 0), int(bool(correct)))
        return AKTBelief((*belief.steps, step)[-self.settings.max_len:])

    def _forward(self, histories: Sequence[tuple[tuple[int, int, int], ...]], queries: Sequence[tuple[int, int]]):
        """P(correct) of each query step ``(kc, item)`` after its history (one forward each)."""
        torch = self._torch
        out = []
        with torch.inference_mode():
            for hist, (k, it) in zip(histories, queries, strict=True):
                seq = [*hist, (k, it, 0)]
                q = torch.tensor([[s[0] for s in seq]])
                r = torch.tensor([[s[2] for s in seq]])
                p = torch.tensor([[s[1] for s in seq]])
                preds, _ = self.net(q, r, p)
                out.append(float(preds[0, -1]))
        return out

    def _masteries_at(self, steps: tuple[tuple[int, int, int], ...]) -> tuple[float, ...]:
        torch = self._torch
        n = len(self._kcs)
        seq_q = [s[0] for s in steps]
        seq_r = [s[2] for s in steps]
        seq_p = [s[1] for s in steps]
        q = torch.tensor([[*seq_q, k] for k in range(n)])
        r = torch.tensor([[*seq_r, 0] for _ in range(n)])
        p = torch.tensor([[*seq_p, 0] for _ in range(n)])
        with torch.inference_mode():
            preds, _ = self.net(q, r, p)
        return tuple(float(v) for v in preds[:, -1])

    def mastery(self, belief: AKTBelief, kc: str) -> float:
        return self._cache(belief.steps)[self._kc_index[self.check_kc(kc)]]

    def masteries(self, belief: AKTBelief) -> dict[str, float]:
        values = self._cache(belief.steps)
        return dict(zip(self._kcs, values, strict=True))

    def predict(self, belief: AKTBelief, kc: str, item: Hashable | None = None) -> float:
        index = self._item_index.get(str(item), 0) if item is not None else 0
        if index == 0:
            return self.mastery(belief, kc)
        return self._forward([belief.steps], [(self._kc_index[self.check_kc(kc)], index)])[0]

    # ------------------------------------------------------------------------------------ files

    def save(self, path: str | os.PathLike[str]) -> Path:
        """``path`` (JSON) and ``path`` with ``.safetensors`` (the weights); returns ``path``."""
        from safetensors.torch import save_file

        from simhub import __version__

        path = Path(path)
        weights = path.with_suffix(".safetensors")
        tmp = weights.with_name(weights.name + ".tmp")
        save_file({k: v.contiguous() for k, v in self.net.state_dict().items()}, str(tmp))
        os.replace(tmp, weights)
        document = {"schema_version": AKT_VERSION, "backend": "akt", "kcs": list(self._kcs), "items": list(self.items),
                    "settings": asdict(self.settings), "weights": weights.name, "fit": self.fit,
                    "simhub_version": __version__}
        atomic_write_bytes(path, (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode())
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> AKTModel:
        from safetensors.torch import load_file

        from simhub.runformat import check_version

        path = Path(path)
        raw = read_json_object(path)
        check_version(raw.get("schema_version"), (AKT_VERSION,), str(path), what="AKT file ", file=str(path))
        for key in ("kcs", "items", "settings", "weights"):
            if key not in raw:
                raise DataError(f"{path}: {key}: missing", file=str(path), field=key)
        try:
            settings = AKTSettings(**raw["settings"])
        except TypeError as exc:
            raise DataError(f"{path}: settings: {exc}", file=str(path), field="settings") from None
        weights = path.with_name(str(raw["weights"]))
        if not weights.is_file():
            raise DataError(f"{path}: weights: {weights.name} is not next to it", file=str(path), field="weights")
        net = _network(len(raw["kcs"]), len(raw["items"]), settings)
        net.load_state_dict(load_file(str(weights)))
        return cls(net, raw["kcs"], raw["items"], settings, raw.get("fit"))


def _network(n_kcs: int, n_items: int, settings: AKTSettings):
    AKT = _akt_class()
    return AKT(n_question=n_kcs, n_pid=n_items, dropout=settings.dropout, kq_same=1, emb_type="qid",
               **settings.network())


def fit_akt(log: Any, settings: AKTSettings | None = None) -> AKTModel:
    """AKT trained on a :class:`~simhub.learners.kt.logs.ResponseLog` (each student one sequence, in
    time order): binary cross-entropy of every step's prediction plus AKT's Rasch regulariser, Adam,
    full sequences padded and masked. Deterministic for a seed on CPU."""
    import torch

    settings = settings or AKTSettings()
    torch.manual_seed(settings.seed)
    kcs = log.kcs
    items = sorted({r.item for r in log})
    if not kcs:
        raise DataError("no observations to fit", field="data")
    kc_index = {k: i for i, k in enumerate(kcs)}
    item_index = {it: i + 1 for i, it in enumerate(items)}
    seqs = [[(kc_index[r.kc], item_index[r.item], int(r.correct)) for r in rows][-settings.max_len:]
            for rows in log.by_student().values()]
    seqs = [s for s in seqs if s]
    net = _network(len(kcs), len(items), settings)
    opt = torch.optim.Adam(net.parameters(), lr=settings.lr)
    g = torch.Generator().manual_seed(settings.seed)
    losses = []
    for _ in range(settings.epochs):
        net.train()
        order = torch.randperm(len(seqs), generator=g).tolist()
        total = 0.0
        for start in range(0, len(order), settings.batch_size):
            batch = [seqs[i] for i in order[start:start + settings.batch_size]]
            width = max(len(s) for s in batch)
            q = torch.zeros(len(batch), width, dtype=torch.long)
            r = torch.zeros(len(batch), width, dtype=torch.long)
            p = torch.zeros(len(batch), width, dtype=torch.long)
            mask = torch.zeros(len(batch), width, dtype=torch.bool)
            for b, s in enumerate(batch):
                for t, (k, it, c) in enumerate(s):
                    q[b, t], p[b, t], r[b, t], mask[b, t] = k, it, c, True
            preds, reg = net(q, r, p)
            loss = torch.nn.functional.binary_cross_entropy(preds[mask], r[mask].float()) + reg
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.detach().item() * len(batch)
        losses.append(total / len(seqs))
    net.eval()
    return AKTModel(net, kcs, items, settings, fit={"students": len(seqs), "answers": sum(len(s) for s in seqs),
                                                   "final_loss": losses[-1], "first_loss": losses[0]})
