"""The per-trace text cache that evaluators share gives exactly what tokenizing afresh gives.

Evidence and drift read the same outputs of a trace through `TraceInfo.texts`; drift's embedding
from those cached tokens must equal its embedding from the texts, and the cache's tokens must be
the module functions' tokens, whatever the text (any Unicode, typographic punctuation, joiners).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tracehound.drift import HashingEmbedder
from tracehound.drift._features import embed_run
from tracehound.evaluators.base import TraceInfo
from tracehound.text import TextCache, informative_tokens, normalize_text

_WORDS = st.sampled_from(
    [
        "The",
        "agent",
        "’s",
        "tool",
        "3.14",
        "GPT-5",
        "—",
        "“quoted”",
        "Straße",
        "ΣΑΣ",
        "-",
        ".",
        "of",
    ]
)
_TEXTS = st.one_of(
    st.text(max_size=200),
    st.lists(_WORDS, max_size=40).map(" ".join),
)


@settings(max_examples=300, deadline=None)
@given(_TEXTS)
def test_cached_tokens_are_the_module_tokens(text: str) -> None:
    cache = TextCache()
    assert " ".join(cache.tokens(text)) == normalize_text(text)
    assert cache.informative(text) == informative_tokens(text)
    assert cache.tokens(text) is cache.tokens(text)  # tokenized once
    expected = (normalize_text(text), informative_tokens(text))
    assert cache.normalized_informative(text) == expected  # after tokens and informative
    fresh = TextCache()
    assert fresh.normalized_informative(text) == expected  # first
    assert fresh.informative(text) is fresh.normalized_informative(text)[1]
    assert fresh.tokenized(text).token_set == frozenset(expected[1])


@settings(max_examples=150, deadline=None)
@given(st.lists(_TEXTS, min_size=1, max_size=6))
def test_drift_embedding_from_the_shared_cache_equals_the_fresh_one(texts: list[str]) -> None:
    embedder = HashingEmbedder()
    shared = TextCache()
    for text in texts:  # what evidence would have done first
        shared.tokenized(text)
    fresh = embed_run(texts, embedder)
    cached = embed_run(texts, embedder, shared)
    np.testing.assert_array_equal(cached, fresh)


def test_each_trace_has_its_own_cache() -> None:
    a, b = TraceInfo("a" * 32), TraceInfo("b" * 32)
    assert a.texts is not b.texts
    a.texts.tokens("hello world")
    assert b.texts.tokens("hello world") == ("hello", "world")
