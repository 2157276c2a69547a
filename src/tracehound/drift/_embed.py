"""Text embedders for the semantic drift component.

An embedder turns texts into vectors of a fixed dimension made of one or more *blocks*, each
L2-normalized; the distance between two vectors is the weighted mean of the blocks' cosine
distances (one block: the plain cosine distance). Its `name`, `dim` and `blocks` are stored with
every baseline: vectors of two embedders live in different spaces, so a baseline refuses runs
(and merges) from another embedder.

- `HashingEmbedder` (the default): deterministic, numpy only, no model and no network. Each text
  is tokenized by `tracehound.text` (the tokens the evidence evaluator uses: NFKC, case-folded,
  stop words dropped), and its informative unigrams and adjacent bigrams are hashed (CRC-32,
  memoized per token; signed feature hashing) into `dim - len(STANCE_CATEGORIES)` buckets. The
  last dimensions hold a small *stance* block: counts of cue words per category (tentative,
  certainty, negation, refusal, failure — the categories psycholinguistic lexicons such as
  LIWC use). A bag of words sees *what* a text talks about; the stance block sees *how*: an
  agent that starts hedging ("maybe", "not sure", "might") while using the same vocabulary moves
  little in the lexical part and a lot in the stance part. The two parts are separate blocks:
  distances weigh the stance block by `stance_weight` (default 0.5; 0 turns it off) and the
  lexical block by the rest, however many texts and runs are summed into a centroid. A text with
  no cue word has an empty stance block and is compared on its words alone. The cue lists are
  deliberately short and generic; they are a heuristic, not a model — use the
  sentence-transformers embedder for semantics proper.
- `WordLlamaEmbedder`: WordLlama's static token embeddings (`l2_supercat`: one 256-d vector per
  token of the Llama 2 vocabulary), behind the `tracehound[semantic]` extra. A text's vector is
  the mean of its tokens' rows, L2-normalized: one tokenizer pass and one gather per text, numpy
  only; plus the stance block. The weights and the tokenizer file are read from the installed
  `wordllama` package's directory, never from the network; the package itself is not imported.
  `default_embedder()` picks it when the extra is installed, the hashing embedder otherwise.
- `SentenceTransformerEmbedder`: a local sentence-transformers model given by path, behind the
  `tracehound[embeddings]` extra.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import os
import re
import struct
import zlib
from collections import Counter
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np
import numpy.typing as npt

from tracehound import _accel
from tracehound.text import STOP_WORDS, informative_tokens

__all__ = [
    "DEFAULT_DIM",
    "SEMANTIC_INSTALL_HINT",
    "STANCE_CATEGORIES",
    "Blocks",
    "Embedder",
    "HashingEmbedder",
    "SentenceTransformerEmbedder",
    "WordLlamaEmbedder",
    "default_embedder",
    "embedder_setting",
]

FloatArray = npt.NDArray[np.float64]
Blocks = tuple[tuple[int, int, float], ...]

DEFAULT_DIM = 1024

# Cue words per stance category (informative tokens as `tracehound.text` produces them). Kept
# short and generic on purpose: they describe an attitude, not a domain.
STANCE_CATEGORIES: dict[str, frozenset[str]] = {
    "tentative": frozenset(
        (
            "maybe",
            "perhaps",
            "possibly",
            "possible",
            "probably",
            "might",
            "may",
            "could",
            "unsure",
            "uncertain",
            "uncertainty",
            "unclear",
            "seem",
            "seems",
            "seemed",
            "seemingly",
            "guess",
            "tentative",
            "tentatively",
            "provisional",
            "provisionally",
            "hesitant",
            "doubt",
            "doubtful",
            "ambiguous",
            "plausible",
            "apparently",
            "presumably",
            "somewhat",
            "hopefully",
            "reconsider",
            "revise",
            "wonder",
        )
    ),
    "certainty": frozenset(
        (
            "clearly",
            "clear",
            "definitely",
            "certainly",
            "confirmed",
            "confident",
            "confidence",
            "optimal",
            "always",
            "exactly",
            "immediately",
            "verified",
            "obviously",
            "undoubtedly",
            "decided",
            "straightforward",
            "consistent",
            "standard",
            "established",
        )
    ),
    "negation": frozenset(
        (
            "not",
            "no",
            "never",
            "none",
            "nothing",
            "neither",
            "nor",
            "cannot",
            "without",
        )
    ),
    "refusal": frozenset(
        (
            "sorry",
            "apologize",
            "apologies",
            "unable",
            "refuse",
            "decline",
        )
    ),
    "failure": frozenset(
        (
            "error",
            "errors",
            "failed",
            "fail",
            "failure",
            "retry",
            "retrying",
            "again",
            "exception",
            "timeout",
            "invalid",
        )
    ),
}
_STANCE_INDEX: dict[str, int] = {
    word: i for i, words in enumerate(STANCE_CATEGORIES.values()) for word in words
}
_N_STANCE = len(STANCE_CATEGORIES)

_BIGRAM_MULT = np.uint64(0x9E3779B1)
_MASK32 = np.uint64(0xFFFFFFFF)
_SIGN_MULT = np.uint64(0x2545F491)
_TOKEN_CACHE_LIMIT = 1 << 18


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors (rows); zero rows for texts without content."""

    @property
    def name(self) -> str:
        """Stable identifier of the embedding space (stored with baselines)."""
        ...

    @property
    def dim(self) -> int:
        """Vector dimension."""
        ...

    @property
    def blocks(self) -> Blocks:
        """The vector's blocks as (start, stop, weight): each block is a space of its own.

        Every block of a row is L2-normalized (or zero); the distance between two vectors is the
        weighted mean of the blocks' cosine distances (blocks that are zero on either side are
        left out). Weights sum to 1. A plain embedder has one block, `((0, dim, 1.0),)`.
        """
        ...

    def embed(self, texts: Sequence[str]) -> FloatArray:
        """An array of shape (len(texts), dim): one row per text, each block unit or zero."""
        ...


class HashingEmbedder:
    """Deterministic feature-hashing embedder (unigrams + bigrams, and a stance block).

    The same text gives the same vector in every process and on every platform: hashes are
    CRC-32 of UTF-8 tokens (memoized per token, the memo bounded), never Python's randomized
    `hash()`. The C accelerator, when built, computes the same rows to the bit (no memo there).
    The name encodes the configuration, e.g. `hashing-v1(uni+bi,stance=0.5)`.
    """

    __slots__ = ("_bigrams", "_blocks", "_cache", "_dim", "_lexical_dim", "_name", "_stance_weight")

    def __init__(
        self, dim: int = DEFAULT_DIM, *, stance_weight: float = 0.5, bigrams: bool = True
    ) -> None:
        if not isinstance(dim, int) or dim < 2 * _N_STANCE:
            raise ValueError(f"HashingEmbedder dim must be an int >= {2 * _N_STANCE}, got {dim!r}")
        if not 0.0 <= stance_weight < 1.0:
            raise ValueError("HashingEmbedder stance_weight must be within [0, 1)")
        self._dim = dim
        self._stance_weight = float(stance_weight)
        self._lexical_dim = dim - _N_STANCE if stance_weight > 0 else dim
        self._bigrams = bigrams
        self._blocks: Blocks = (
            (
                (0, self._lexical_dim, 1.0 - self._stance_weight),
                (self._lexical_dim, dim, self._stance_weight),
            )
            if stance_weight > 0
            else ((0, dim, 1.0),)
        )
        self._name = f"hashing-v1({'uni+bi' if bigrams else 'uni'},stance={self._stance_weight:g})"
        self._cache: dict[str, int] = {}

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def blocks(self) -> Blocks:
        return self._blocks

    def embed(self, texts: Sequence[str]) -> FloatArray:
        return self.embed_tokens([informative_tokens(text) if text else () for text in texts])

    def embed_tokens(self, token_lists: Sequence[Sequence[str]]) -> FloatArray:
        """Rows for already tokenized texts (informative tokens, in order), one per list.

        With the C accelerator, `embed_hashed` computes the rows in one pass over the tokens.
        Otherwise (and for the input it leaves to Python), all texts go through numpy together:
        one hashing pass and one `bincount` for the batch. Both give the same bits.
        """
        n = len(token_lists)
        embed_hashed = _accel.kernel("embed_hashed")
        if embed_hashed is not None:
            out = np.empty((n, self._dim), dtype=np.float64)
            stance_index = _STANCE_INDEX if self._stance_weight > 0 else None
            if embed_hashed(token_lists, out, self._lexical_dim, self._bigrams, stance_index):
                return out
            _accel.declined("embed_hashed")  # it left `out` all zeros
        else:
            out = np.zeros((n, self._dim), dtype=np.float64)
        lexical_dim = self._lexical_dim
        cache = self._cache
        get = cache.get
        miss = self._hash_miss
        hashes: list[int] = []
        rows: list[int] = []
        for row, tokens in enumerate(token_lists):
            if tokens:
                hashes.extend([get(t) or miss(t) for t in tokens])
                rows.extend([row] * len(tokens))
        if not hashes:
            return out
        unigrams = np.array(hashes, dtype=np.uint64)
        row_of = np.array(rows, dtype=np.intp)
        if self._bigrams and len(unigrams) > 1:
            same_text = row_of[:-1] == row_of[1:]
            bigrams = ((unigrams[:-1] * _BIGRAM_MULT) ^ (unigrams[1:] + _BIGRAM_MULT)) & _MASK32
            features = np.concatenate((unigrams, bigrams[same_text]))
            row_of = np.concatenate((row_of, row_of[:-1][same_text]))
        else:
            features = unigrams
        buckets = (features % np.uint64(lexical_dim)).astype(np.intp)
        signs = 1.0 - 2.0 * (((features * _SIGN_MULT) >> np.uint64(31)) & np.uint64(1)).astype(
            np.float64
        )
        lexical = np.bincount(
            row_of * lexical_dim + buckets, weights=signs, minlength=n * lexical_dim
        ).reshape(n, lexical_dim)
        norms = np.sqrt(np.einsum("ij,ij->i", lexical, lexical))
        present = norms > 0.0
        out[:, :lexical_dim] = lexical / np.where(present, norms, 1.0)[:, None]
        if self._stance_weight == 0.0:
            return out
        stance = np.zeros((n, _N_STANCE), dtype=np.float64)
        index = _STANCE_INDEX
        for row, tokens in enumerate(token_lists):
            if present[row]:
                for category, count in Counter(map(index.get, tokens)).items():
                    if category is not None:
                        stance[row, category] = count
        stance_norms = np.sqrt(np.einsum("ij,ij->i", stance, stance))
        out[:, lexical_dim:] = stance / np.where(stance_norms > 0.0, stance_norms, 1.0)[:, None]
        return out

    def embed_tokens_sum(self, token_lists: Sequence[Sequence[str]]) -> FloatArray:
        """The sum of the rows of `embed_tokens(token_lists)` (a vector of `dim`).

        `np.add.reduce` over the rows, which adds them in order; with the C accelerator,
        `embed_hashed_sum` adds them in that order too, without the rows' matrix: the same bits.
        """
        native = _accel.kernel("embed_hashed_sum")
        if native is not None:
            out = np.empty(self._dim, dtype=np.float64)
            stance_index = _STANCE_INDEX if self._stance_weight > 0 else None
            if native(token_lists, out, self._lexical_dim, self._bigrams, stance_index):
                return out
            _accel.declined("embed_hashed_sum")
        rows = np.asarray(self.embed_tokens(token_lists), dtype=np.float64)
        total: FloatArray = np.add.reduce(rows, axis=0)
        return total

    def embed_texts_sum(self, texts: Sequence[str]) -> FloatArray | None:
        """The sum of the rows of `embed(texts)`, computed by the C accelerator straight from
        the texts, or None when it is not built or leaves the texts to Python (a text off the
        tokenizer's ASCII path, for one).

        `embed_texts_sum` tokenizes each text, drops the stop words and hashes the informative
        tokens without making them Python strings: the same bits as `embed_tokens_sum` of the
        texts' informative tokens.
        """
        native = _accel.kernel("embed_texts_sum")
        if native is None:
            return None
        out = np.empty(self._dim, dtype=np.float64)
        stance_index = _STANCE_INDEX if self._stance_weight > 0 else None
        if native(texts, out, self._lexical_dim, self._bigrams, stance_index, STOP_WORDS):
            return out
        _accel.declined("embed_texts_sum")
        return None

    def _hash_miss(self, token: str) -> int:
        cache = self._cache
        if len(cache) >= _TOKEN_CACHE_LIMIT:
            cache.clear()
        value = cache[token] = zlib.crc32(token.encode("utf-8"))
        return value


_INSTALL_HINT = (
    "the sentence-transformers embedder needs the optional dependency: "
    "pip install 'tracehound[embeddings]'"
)


class SentenceTransformerEmbedder:
    """A local sentence-transformers model, loaded from a directory (never downloaded).

    Needs the `tracehound[embeddings]` extra; without it, construction raises `ImportError` with
    the install command. The baseline name is `st:<directory name>`.
    """

    __slots__ = ("_dim", "_model", "_name")

    def __init__(self, model_path: str | Path, *, device: str | None = None) -> None:
        path = Path(model_path).expanduser()
        if not path.is_dir():
            raise ValueError(
                f"sentence-transformers model path {str(path)!r} is not a directory "
                "(give the local path of a downloaded model)"
            )
        try:
            module: Any = importlib.import_module("sentence_transformers")
        except ImportError as exc:
            raise ImportError(_INSTALL_HINT) from exc
        self._model: Any = module.SentenceTransformer(
            str(path), device=device, local_files_only=True
        )
        dim = self._model.get_sentence_embedding_dimension()
        if not isinstance(dim, int) or dim < 1:
            raise ValueError(f"model at {str(path)!r} does not report an embedding dimension")
        self._dim = dim
        self._name = f"st:{path.resolve().name}"

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def blocks(self) -> Blocks:
        return ((0, self._dim, 1.0),)

    def embed(self, texts: Sequence[str]) -> FloatArray:
        out = np.zeros((len(texts), self._dim), dtype=np.float64)
        present = [i for i, text in enumerate(texts) if text and text.strip()]
        if not present:
            return out
        vectors = self._model.encode(
            [texts[i] for i in present],
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        out[present] = np.asarray(vectors, dtype=np.float64)
        return out


SEMANTIC_INSTALL_HINT = (
    "the WordLlama embedder needs the optional dependency: pip install 'tracehound[semantic]'"
)
WORDLLAMA_CONFIG = "l2_supercat"
WORDLLAMA_DIM = 256
_WORDLLAMA_WEIGHTS = f"weights/{WORDLLAMA_CONFIG}_{WORDLLAMA_DIM}.safetensors"
_WORDLLAMA_TOKENIZER = f"tokenizers/{WORDLLAMA_CONFIG}_tokenizer_config.json"
_SAFETENSORS_DTYPES = {"F16": "<f2", "F32": "<f4", "F64": "<f8"}


def wordllama_directory() -> Path | None:
    """The installed `wordllama` package's directory (None: not installed). Not imported."""
    try:
        spec = importlib.util.find_spec("wordllama")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _read_safetensors_matrix(path: Path, name: str) -> npt.NDArray[Any]:
    """The tensor `name` of a safetensors file (8-byte header length, JSON header, raw data)."""
    with path.open("rb") as handle:
        (size,) = struct.unpack("<Q", handle.read(8))
        if not 0 < size < 1 << 24:
            raise ValueError(f"{path}: not a safetensors file")
        header = json.loads(handle.read(size))
        entry = header.get(name) if isinstance(header, dict) else None
        if not isinstance(entry, dict) or entry.get("dtype") not in _SAFETENSORS_DTYPES:
            raise ValueError(f"{path}: no {name!r} tensor of a float type")
        rows, cols = entry["shape"]
        begin, end = entry["data_offsets"]
        handle.seek(8 + size + begin)
        raw = handle.read(end - begin)
    matrix = np.frombuffer(raw, dtype=_SAFETENSORS_DTYPES[entry["dtype"]])
    if matrix.size != rows * cols:
        raise ValueError(f"{path}: tensor {name!r} is truncated")
    return matrix.reshape(rows, cols)


# The tokenizer's normalizer marks spaces (and the text's start) with U+2581, and its BPE vocabulary
# has that mark only at the start of a token: so no token spans a mark that follows another
# character, and the text can be cut before each such mark into word pieces tokenized alone.
_SPACE_MARK = "\u2581"
_WORD_PIECE = re.compile("(?<=[^\u2581])(?=\u2581)")
_PIECE_CACHE_SIZE = 1 << 16
_EXPECTED_NORMALIZER = {
    "type": "Sequence",
    "normalizers": [
        {"type": "Prepend", "prepend": _SPACE_MARK},
        {"type": "Replace", "pattern": {"String": " "}, "content": _SPACE_MARK},
    ],
}


def _word_pieces_exact(tokenizer: Any) -> bool:
    """Whether tokenizing word piece by word piece gives `encode`'s ids for this tokenizer: the
    normalizer above, no pre-tokenizer, a BPE model, and no token with the mark inside it."""
    config = json.loads(tokenizer.to_str())
    if config.get("normalizer") != _EXPECTED_NORMALIZER or config.get("pre_tokenizer") is not None:
        return False
    if config.get("model", {}).get("type") != "BPE":
        return False
    return not any(_SPACE_MARK in token.lstrip(_SPACE_MARK) for token in tokenizer.get_vocab())


class WordLlamaEmbedder:
    """WordLlama `l2_supercat` static embeddings (256-d), loaded from the installed package, and
    the hashing embedder's stance block.

    Needs `pip install 'tracehound[semantic]'` (the `wordllama` wheel, which carries the weights
    and the tokenizer file, and the `tokenizers` library); without it, construction raises
    `ImportError` with that command. Nothing is downloaded. A text's vector is the mean of its
    tokens' embedding rows (special tokens excluded), L2-normalized, in float64: the same
    vector for the same text on every run. A mean of word vectors sees what a text is about
    and little of its attitude, so, as with `HashingEmbedder`, the last `len(STANCE_CATEGORIES)`
    dimensions are a stance block (cue-word counts per category), weighed `stance_weight` (0.3
    by default; 0 leaves it out). The baseline name is e.g. `wordllama-l2_supercat-256(stance=0.3)`.
    """

    __slots__ = (
        "_blocks",
        "_dim",
        "_matrix",
        "_name",
        "_piece_ids",
        "_pieces",
        "_stance_weight",
        "_tokenizer",
    )

    def __init__(self, directory: str | Path | None = None, *, stance_weight: float = 0.3) -> None:
        if not 0.0 <= stance_weight < 1.0:
            raise ValueError("WordLlamaEmbedder stance_weight must be within [0, 1)")
        root = Path(directory) if directory is not None else wordllama_directory()
        if root is None:
            raise ImportError(SEMANTIC_INSTALL_HINT)
        weights = root / _WORDLLAMA_WEIGHTS
        tokenizer_file = root / _WORDLLAMA_TOKENIZER
        for path in (weights, tokenizer_file):
            if not path.is_file():
                raise ImportError(f"{path} is missing: {SEMANTIC_INSTALL_HINT}")
        try:
            tokenizers: Any = importlib.import_module("tokenizers")
        except ImportError as exc:
            raise ImportError(SEMANTIC_INSTALL_HINT) from exc
        matrix = _read_safetensors_matrix(weights, "embedding.weight")
        if matrix.shape[1] != WORDLLAMA_DIM:
            raise ValueError(f"{weights}: {matrix.shape[1]} dimensions, not {WORDLLAMA_DIM}")
        # float32 holds each float16 exactly and is gathered several times faster
        self._matrix = matrix.astype(np.float32)
        self._tokenizer: Any = tokenizers.Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        if self._tokenizer.get_vocab_size(with_added_tokens=True) > matrix.shape[0]:
            raise ValueError(f"{tokenizer_file}: more tokens than {weights} has rows")
        self._pieces = _word_pieces_exact(self._tokenizer)
        self._piece_ids: dict[str, list[int]] = {}
        self._stance_weight = float(stance_weight)
        if stance_weight > 0:
            self._dim = WORDLLAMA_DIM + _N_STANCE
            self._blocks: Blocks = (
                (0, WORDLLAMA_DIM, 1.0 - self._stance_weight),
                (WORDLLAMA_DIM, self._dim, self._stance_weight),
            )
        else:
            self._dim = WORDLLAMA_DIM
            self._blocks = ((0, WORDLLAMA_DIM, 1.0),)
        self._name = f"wordllama-{WORDLLAMA_CONFIG}-{WORDLLAMA_DIM}(stance={self._stance_weight:g})"

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def blocks(self) -> Blocks:
        return self._blocks

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The tokenizer's ids of each text (no special tokens)."""
        if not self._pieces:
            # one text at a time: the batch methods run on the tokenizers library's thread
            # pool, which a forked worker (and a busy sidecar) is better without
            encode = self._tokenizer.encode
            return [encode(text, add_special_tokens=False).ids for text in texts]
        return [self._ids_by_piece(text) for text in texts]

    def _ids_by_piece(self, text: str) -> list[int]:
        """`encode(text).ids`, word piece by word piece: BPE over a whole text is one long
        merge sequence (~0.5 ms per KB), while a piece's ids, the same wherever it occurs
        (`_word_pieces_exact`), are looked up once and remembered. A piece with one mark (most)
        is keyed by its word, one with several (runs of spaces, a trailing space) by itself."""
        if not text:
            return []
        marked = text.replace(" ", _SPACE_MARK)
        keys = marked.split(_SPACE_MARK)
        if "" in keys:
            keys = [
                piece if piece[1:2] == _SPACE_MARK else piece[1:]
                for piece in _WORD_PIECE.split(_SPACE_MARK + marked)
            ]
        known = self._piece_ids
        found = list(map(known.get, keys))
        if None in found:
            model = self._tokenizer.model
            if len(known) >= _PIECE_CACHE_SIZE:
                known.clear()  # the vocabulary of a workload refills it at once
            for at, key in enumerate(keys):
                if found[at] is None:
                    piece = key if key[:1] == _SPACE_MARK else _SPACE_MARK + key
                    found[at] = known[key] = [token.id for token in model.tokenize(piece)]
        return list(chain.from_iterable(cast("list[list[int]]", found)))

    def embed(self, texts: Sequence[str]) -> FloatArray:
        out = np.zeros((len(texts), self._dim), dtype=np.float64)
        present = [i for i, text in enumerate(texts) if text and not text.isspace()]
        if not present:
            return out
        matrix = self._matrix
        stance = self._stance_weight > 0.0
        index = _STANCE_INDEX
        for row, ids in zip(present, self.token_ids([texts[i] for i in present]), strict=True):
            if not ids:
                continue
            # float16 values (held as float32) summed in float64 are exact, so in any order
            vector = np.add.reduce(matrix.take(ids, axis=0), axis=0, dtype=np.float64)
            norm = math.sqrt(float(vector @ vector))
            if norm <= 0.0:
                continue
            out[row, :WORDLLAMA_DIM] = vector / norm
            if stance:
                counts = np.zeros(_N_STANCE, dtype=np.float64)
                for category, count in Counter(
                    map(index.get, informative_tokens(texts[row]))
                ).items():
                    if category is not None:
                        counts[category] = count
                stance_norm = math.sqrt(float(counts @ counts))
                if stance_norm > 0.0:
                    out[row, WORDLLAMA_DIM:] = counts / stance_norm
        return out


def embedder_setting() -> str:
    """Which embedder `default_embedder()` makes: `wordllama` or `hashing`, from
    `TRACEHOUND_EMBEDDER` (`auto` or unset: WordLlama when installed). `ValueError` (one line,
    naming the variable) for any other value, and for `wordllama` without the extra."""
    raw = os.environ.get(ENV_EMBEDDER, "")
    choice = raw.strip().lower()
    if choice == "hashing":
        return "hashing"
    if choice not in ("", "auto", "wordllama"):
        raise ValueError(f"{ENV_EMBEDDER}={raw!r}: expected 'auto', 'wordllama' or 'hashing'")
    installed = wordllama_directory() is not None
    if choice == "wordllama" and not installed:
        raise ValueError(f"{ENV_EMBEDDER}=wordllama: {SEMANTIC_INSTALL_HINT}")
    return "wordllama" if installed else "hashing"


def default_embedder() -> Embedder:
    """`WordLlamaEmbedder()` when `tracehound[semantic]` is installed, else `HashingEmbedder()`
    (`embedder_setting()`: `TRACEHOUND_EMBEDDER=hashing` keeps the hashing embedder with the
    extra installed)."""
    if embedder_setting() == "wordllama":
        return WordLlamaEmbedder()
    return HashingEmbedder()


ENV_EMBEDDER = "TRACEHOUND_EMBEDDER"
"""Which semantic embedder `default_embedder()` makes: `auto` (default: WordLlama when installed,
else hashing), `wordllama` (an error without the extra) or `hashing`."""
