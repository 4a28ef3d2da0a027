"""The tiny model kit the demo and the tests run on (a real tokenizer and real Llama checkpoints
small enough for a CPU); see :mod:`simhub.demo.tiny`."""

from simhub.demo.tiny import TINY_LLAMA, build_kit

__all__ = ["TINY_LLAMA", "build_kit"]
