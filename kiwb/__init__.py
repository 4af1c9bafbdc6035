"""kiwb: the Knowledge Integration WorkBench."""

__version__ = "0.1.0"
