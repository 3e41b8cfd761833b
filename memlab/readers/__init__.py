"""Readers turn a retrieval into an answer. Built-ins: ``embedding`` (LLM-free default) and the
``longest_option`` blind control; LLM readers register in the same ``memlab.readers`` group."""

from memlab.readers.base import Reader, ReaderConfig, argmax, strip_option_label

__all__ = ["Reader", "ReaderConfig", "argmax", "strip_option_label"]
