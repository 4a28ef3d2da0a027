"""The small synthetic sample corpus shipped with simhub, the default data of the demo and the tests.

Its files have the exact layout of the real inputs: ``raw/`` holds QATD-2k-format files (docs/protocol.md §2)
and ``annotations/`` the released annotation layout (docs/protocol.md §8), so everything that runs on the
sample runs unchanged on the real data. The files are made by ``scripts/make_sample.py`` in a
checkout; the package only ships and reads them.
"""

from __future__ import annotations

import functools
from pathlib import Path

from simhub.data.eedi import EediCorpus, load_eedi

SAMPLE_DIR = Path(__file__).parent.parent / "resources" / "sample"

#: The annotator name in the sample's annotation file names. The labels are the generator's own
#: gold labels written in the layout of the authors' GPT-4.1 release, not any model's output.
SAMPLE_ANNOTATOR = "gpt-4.1"


def sample_raw_dir() -> Path:
    """The shipped raw QATD-2k-format files (the ``source`` of :func:`simhub.data.eedi.load_eedi`)."""
    return SAMPLE_DIR / "raw"


def sample_annotations_dir() -> Path:
    """The shipped annotation files, ``{split}_gpt-4.1.csv`` (the ``annotations`` of ``load_eedi``)."""
    return SAMPLE_DIR / "annotations"


@functools.lru_cache(maxsize=1)
def load_sample_corpus() -> EediCorpus:
    """The shipped sample corpus with its annotations, loaded once per process.

    Raw files and annotations are both given so that every load checks that they agree. The
    result is shared between callers: treat it as read-only.
    """
    return load_eedi(sample_raw_dir(), sample_annotations_dir(), annotator=SAMPLE_ANNOTATOR)
