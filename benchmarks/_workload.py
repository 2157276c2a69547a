"""Shared pieces of the benchmarks' generated traces: realistic English text, OTLP values.

Sentences come from CPython's own documentation (`pydoc_data.topics`), with the typography LLM
output has (curly quotes, dashes), so tokenization and JSON costs are those of real agent text.
"""

from __future__ import annotations

import random
import re
from pydoc_data.topics import topics
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue

__all__ = ["Prose", "any_value"]


def any_value(v: Any) -> AnyValue:
    """A Python value as an OTLP `AnyValue` (lists become arrays, anything else a string)."""
    if isinstance(v, bool):
        return AnyValue(bool_value=v)
    if isinstance(v, int):
        return AnyValue(int_value=v)
    if isinstance(v, float):
        return AnyValue(double_value=v)
    if isinstance(v, list):
        av = AnyValue()
        av.array_value.values.extend(any_value(x) for x in v)
        return av
    return AnyValue(string_value=str(v))


def sentences() -> list[str]:
    """English sentences from the CPython docs, with the typography LLM output has."""
    out: list[str] = []
    for key in sorted(topics):
        text = re.sub(r"\s+", " ", topics[key])
        for sentence in re.split(r"(?<=[.!?]) (?=[A-Z])", text):
            sentence = sentence.strip()
            if 40 <= len(sentence) <= 400 and sentence.count("*") < 3 and ">>>" not in sentence:
                sentence = sentence.replace(" -- ", " — ").replace("n't", "n’t")
                sentence = sentence.replace("'s ", "’s ").replace(" - ", " – ")
                sentence = re.sub(r'"([^"]{1,80})"', "“\\1”", sentence)
                out.append(sentence)
    return out


class Prose:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.sentences = sentences()

    def text(self, nbytes: int) -> str:
        """Consecutive sentences from a random place, about `nbytes` UTF-8 bytes."""
        i = self.rng.randrange(len(self.sentences))
        parts: list[str] = []
        size = 0
        while size < nbytes:
            s = self.sentences[i % len(self.sentences)]
            parts.append(s)
            size += len(s.encode()) + 1
            i += 1
        text = " ".join(parts)
        raw = text.encode()
        if len(raw) > nbytes * 1.05:  # keep sizes near the target; cut on a word
            text = raw[:nbytes].decode("utf-8", "ignore").rsplit(" ", 1)[0] + "."
        return text
