"""Makes `tests/helpers.py` importable as `helpers` from every test folder; configures the C
accelerator; the Redis fixtures."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tracehound import _accel

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

# The C module given Python's constants now, as its first kernel call would: tests call its
# functions directly too, also with TRACEHOUND_PURE_PYTHON=1
_accel.loaded()


@pytest.fixture(scope="session")
def redis_base_url() -> Iterator[str]:
    """A real Redis, `$TRACEHOUND_TEST_REDIS_URL` or a `redis-server` started for the session
    (`redis_helpers`); fails, never skips, when there is neither."""
    from redis_helpers import session_server

    with session_server() as url:
        yield url


@pytest.fixture
def redis_url(redis_base_url: str) -> Iterator[str]:
    """A Redis baseline store URL with a key prefix of this test's own (deleted afterwards)."""
    from redis_helpers import prefixed_url

    with prefixed_url(redis_base_url) as url:
        yield url
