"""Shared fixtures. Tests never touch the network: the Hub is the local one in simhub.testing."""

from __future__ import annotations

import os
import tempfile

# Isolate every Hugging Face cache from the user's before any HF library is imported.
_HF_HOME = tempfile.mkdtemp(prefix="simhub-test-hf-")
os.environ["HF_HOME"] = _HF_HOME
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
