"""Token counting for a chat model profile, from a ``tokenizer.json`` or a conservative estimate.

A profile's ``tokenizer`` is either a file path or ``package:relative/path`` naming a
``tokenizer.json`` shipped inside an installed Python package (read with ``importlib.resources``);
it is loaded with the Hugging Face ``tokenizers`` package. Nothing is ever downloaded.

Without a tokenizer the count is an estimate of one token per 3 characters, rounded up. English
BPE vocabularies average about 4 characters per token (OpenAI, "What are tokens and how to count
them"), so the estimate overcounts English prose by roughly a third and stays safe for most
code and non-English text; the window's safety margin (``chat.token_margin``, 5 %) covers the
rest of the mismatch between a counter and the model's real tokenizer.

Chat formats add a few tokens per message for role markers; :func:`message_tokens` adds 4 per
message, the figure OpenAI's cookbook ("How to count tokens with tiktoken") uses for its models.
"""

from __future__ import annotations

import importlib.resources
import math
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from search2o.errors import ConfigError

__all__ = [
    "PER_MESSAGE_TOKENS",
    "EstimateCounter",
    "TokenCounter",
    "TokenizerCounter",
    "build_token_counter",
    "load_tokenizer",
    "message_tokens",
]

PER_MESSAGE_TOKENS = 4


class TokenCounter(Protocol):
    """Counts the tokens of a text for one model."""

    name: str

    def count(self, text: str) -> int:
        """Return the number of tokens of ``text`` (no special tokens)."""
        ...


class EstimateCounter:
    """One token per 3 characters, rounded up (see the module docstring)."""

    name = "estimate:3-chars-per-token"

    def count(self, text: str) -> int:
        """Return ``ceil(len(text) / 3)``."""
        return math.ceil(len(text) / 3)


class TokenizerCounter:
    """Counts with a ``tokenizer.json`` through the ``tokenizers`` package.

    Raises:
        ConfigError: the file does not exist or is not a tokenizer.

    """

    def __init__(self, path: Path) -> None:
        self._tokenizer = load_tokenizer(path)
        self.name = f"tokenizer:{path.name}"

    def count(self, text: str) -> int:
        """Return the number of tokens ``text`` encodes to, without special tokens."""
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


def load_tokenizer(path: Path) -> Any:
    """Load a ``tokenizer.json`` for counting: its padding and truncation switched off.

    A model's file may pad every input to a fixed length and cut it at the model's limit
    (all-MiniLM-L6-v2's pads and truncates at 128); a count must see the text as it is.

    Raises:
        ConfigError: the file cannot be read as a tokenizer.

    """
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception on a bad file
        raise ConfigError(f"cannot load tokenizer {path}: {exc}") from exc
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def message_tokens(counter: TokenCounter, text: str) -> int:
    """Return the tokens one chat message of ``text`` takes, role markers included."""
    return counter.count(text) + PER_MESSAGE_TOKENS


def _resolve(spec: str) -> Path:
    if ":" in spec and not Path(spec).exists():
        package, _, relative = spec.partition(":")
        try:
            root = importlib.resources.files(package)
        except ModuleNotFoundError as exc:
            raise ConfigError(f"tokenizer {spec!r}: package {package!r} is not installed") from exc
        return Path(str(root.joinpath(relative)))
    return Path(spec).expanduser()


@lru_cache(maxsize=16)
def build_token_counter(spec: str | None) -> TokenCounter:
    """Return the counter for a profile's ``tokenizer`` setting (``None`` = the estimate).

    Counters are cached per spec: a tokenizer file is loaded once per process.

    Raises:
        ConfigError: the file or package does not exist, or the file is not a tokenizer.

    """
    if spec is None:
        return EstimateCounter()
    path = _resolve(spec)
    if not path.is_file():
        raise ConfigError(f"tokenizer {spec!r}: {path} is not a file")
    return TokenizerCounter(path)
