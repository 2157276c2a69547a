"""Shared text handling: normalization, tokens, evidence units.

The rules are fixed so that evidence decisions are reproducible and equal to the `evidenceflow`
package's on the same steps:

- normalization: Unicode NFKC, lower case, then the token sequence joined by single spaces;
- a token is a run of letters/digits, optionally joined by single `.` or `-` to further runs, so
  values such as `3.14`, `2026`, `GPT-5`, `v1.2` stay whole;
- informative tokens are tokens minus a small fixed stop-word list;
- a text is cut into units at paragraph breaks (two or more line breaks) and after sentence-ending
  punctuation followed by whitespace and a word; units with fewer than two informative tokens are
  dropped.

Each distinct text is tokenized once per trace (`TextCache`); matching works on token sets.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from itertools import filterfalse

__all__ = [
    "STOP_WORDS",
    "TextCache",
    "Tokenized",
    "Unit",
    "informative_tokens",
    "normalize_text",
    "split_units",
]

STOP_WORDS = frozenset(
    (  # noqa: SIM905 - one line of words reads better than 25 quoted ones
        "a an and are as at be been by for from in is it of on or that the their this to was "
        "were with"
    ).split()
)
_IS_STOP_WORD = STOP_WORDS.__contains__  # for `filterfalse`: filters in C

_TOKEN = re.compile(r"[^\W_]+(?:[.-][^\W_]+)*")
_UNIT_BOUNDARY = re.compile(r"(?:\r?\n\s*){2,}|(?<=[.!?])\s+(?=[^\W_])")
# The same boundaries, found from the sentence-ending character (kept with its sentence) rather
# than after it: with every alternative starting with a literal, the regex engine skips ahead
# to those characters instead of trying each position (8x faster than splitting on the above).
_UNIT_BREAK = re.compile(
    r"\.\s+(?=[^\W_])|!\s+(?=[^\W_])|\?\s+(?=[^\W_])|\n\s*(?:\r?\n\s*)+|\r\n\s*(?:\r?\n\s*)+"
)


def _segments(text: str) -> list[str]:
    """`_UNIT_BOUNDARY.split(text)`."""
    segments: list[str] = []
    start = 0
    for match in _UNIT_BREAK.finditer(text):
        end = match.start()
        if text[end] in ".!?":
            end += 1
        segments.append(text[start:end])
        start = match.end()
    segments.append(text[start:])
    return segments


# ASCII fast path, twice as fast as the token regex and with the same tokens. In ASCII, token
# characters are [a-z0-9] once lowered, joined by a '.' or '-' that has one on each side. So:
# every other byte becomes a space, then every '.' or '-' not between two token characters
# does, and the tokens are what the spaces separate.
_ASCII_NON_TOKEN = bytes(
    c if chr(c) in "abcdefghijklmnopqrstuvwxyz0123456789.-" else 0x20 for c in range(256)
)
_LONE_JOINER = re.compile(rb"[.-](?:(?<![a-z0-9].)|(?![a-z0-9]))")
# Typographic punctuation, frequent in LLM output: each one separates tokens as a space does
# (NFKC leaves them alone, but for U+2026 -> "..." and U+00A0 -> " ", which separate as well),
# so replacing them by spaces lets such text take the ASCII path.
_TYPOGRAPHIC = ("\u2019", "\u2018", "\u201c", "\u201d", "\u2013", "\u2014", "\u2026", "\u00a0")


def _normalized_tokens(text: str) -> list[str]:
    if not text.isascii():
        plain = text
        for char in _TYPOGRAPHIC:
            if char in plain:
                plain = plain.replace(char, " ")
        if not plain.isascii():  # the original: these characters matter to lower() near a Σ
            return _TOKEN.findall(unicodedata.normalize("NFKC", text).lower())
        text = plain
    data = text.lower().encode("ascii").translate(_ASCII_NON_TOKEN)
    if b"." in data or b"-" in data:
        data = _LONE_JOINER.sub(b" ", data)
    return data.decode("ascii").split()


def normalize_text(text: str) -> str:
    """NFKC, lower case, tokens joined by single spaces."""
    return " ".join(_normalized_tokens(text))


def informative_tokens(text: str) -> tuple[str, ...]:
    return tuple(filterfalse(_IS_STOP_WORD, _normalized_tokens(text)))


@dataclass(frozen=True, slots=True)
class Tokenized:
    """A text as matching sees it."""

    normalized: str
    token_set: frozenset[str]  # informative tokens, unique


@dataclass(frozen=True, slots=True)
class Unit:
    """A sentence or paragraph of evidence with at least two informative tokens."""

    text: str
    normalized: str
    tokens: tuple[str, ...]  # informative tokens, in order, with repeats
    token_set: frozenset[str]

    @property
    def threshold(self) -> int:
        """Shared informative tokens a text needs for the overlap rule to be able to hold.

        The overlap rule needs ≥ 2 shared tokens covering ≥ half of the unique ones; a unit with a
        single unique token can only match by containment, which needs that token too.
        """
        n = len(self.token_set)
        if n == 1:
            return 1
        return max(2, (n + 1) // 2)

    def matches(self, other: Tokenized | Unit, overlap: int | None = None) -> bool:
        """The evidence match rule: normalized containment, or ≥ 2 shared informative tokens
        covering ≥ half of this unit's unique informative tokens."""
        if not other.normalized:
            return False
        if overlap is None:
            overlap = len(self.token_set & other.token_set)
        if overlap >= 2 and 2 * overlap >= len(self.token_set):
            return True
        # Containment implies every informative token is shared; with ≥ 2 unique tokens the
        # overlap rule above already holds, so only single-token units need the string test.
        if overlap == len(self.token_set) and self.normalized:
            return f" {self.normalized} " in f" {other.normalized} "
        return False


def _segment_unit(segment: str) -> Unit | None:
    tokens = _normalized_tokens(segment)
    informative = tuple(filterfalse(_IS_STOP_WORD, tokens))
    if len(informative) < 2:
        return None
    return Unit(segment.strip(), " ".join(tokens), informative, frozenset(informative))


def split_units(text: str) -> list[Unit]:
    units: list[Unit] = []
    for segment in _segments(text.strip()):
        unit = _segment_unit(segment)
        if unit is not None:
            units.append(unit)
    return units


class TextCache:
    """Tokenizes each distinct text once (per trace) and splits each evidence text once; a
    sentence that recurs in other evidence texts (the same document fetched again, boilerplate)
    is tokenized once too. The engine keeps one per trace (`TraceInfo.texts`), so evaluators
    that read the same outputs share the work (drift embeds them; the evidence index, with the
    C accelerator, reads the texts of the tokenizer's ASCII path itself and takes the others
    from here)."""

    __slots__ = ("_informative", "_normalized", "_segments", "_tokenized", "_tokens", "_units")

    def __init__(self) -> None:
        self._tokens: dict[str, tuple[str, ...]] = {}
        self._informative: dict[str, tuple[str, ...]] = {}
        self._normalized: dict[str, str] = {}
        self._tokenized: dict[str, Tokenized] = {}
        self._units: dict[str, list[Unit]] = {}
        self._segments: dict[str, Unit | None] = {}

    def tokens(self, text: str) -> tuple[str, ...]:
        """The text's tokens, in order (`normalize_text` joins them)."""
        cached = self._tokens.get(text)
        if cached is None:
            cached = self._tokens[text] = tuple(_normalized_tokens(text))
        return cached

    def informative(self, text: str) -> tuple[str, ...]:
        """`informative_tokens(text)`, cached (evidence matches an output by its informative
        tokens, drift embeds them)."""
        cached = self._informative.get(text)
        if cached is None:
            cached = self.normalized_informative(text)[1]
        return cached

    def normalized_informative(self, text: str) -> tuple[str, tuple[str, ...]]:
        """`(normalize_text(text), informative_tokens(text))`, cached."""
        normalized = self._normalized.get(text)
        if normalized is not None:
            return normalized, self._informative[text]
        tokens = self.tokens(text)
        normalized = " ".join(tokens)
        informative = tuple(filterfalse(_IS_STOP_WORD, tokens))
        self._informative[text] = informative
        self._normalized[text] = normalized
        return normalized, informative

    def tokenized(self, text: str) -> Tokenized:
        cached = self._tokenized.get(text)
        if cached is None:
            normalized, informative = self.normalized_informative(text)
            cached = self._tokenized[text] = Tokenized(normalized, frozenset(informative))
        return cached

    def units(self, text: str) -> list[Unit]:
        cached = self._units.get(text)
        if cached is None:
            cached = []
            segments = self._segments
            for segment in _segments(text.strip()):
                if segment in segments:
                    unit = segments[segment]
                else:
                    unit = segments[segment] = _segment_unit(segment)
                if unit is not None:
                    cached.append(unit)
            self._units[text] = cached
        return cached
