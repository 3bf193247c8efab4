r"""What one run stores and deletes: the unit of work the Agent Engine applies at the end.

A run's ``memory`` commands do not write: each is recorded in a :class:`MemoryChanges`
(:meth:`MemoryChanges.record`), and the changes are applied only when the run completes
successfully (end, return from main, pause on ask), inside the transaction that saves the
conversation state (:meth:`search2o.memory.store.MemoryStore.apply`). A run that fails drops its
changes; a validation run's changes (``validation=True``) are checked but never applied.

Rules checked here:

* an agent name and a label are ``\w[\w.-]*`` (letters of any script, digits, ``_``, ``.``,
  ``-``; starting with a letter, digit or ``_``), at most 100 and 64 characters;
* one command stores at most 25 labels (and deletes at most 25);
* a text must be a string; an empty text, one longer than ``memory.max_text_chars`` or one that
  is not valid Unicode is **rejected for that label only** (a :class:`Rejection`); the
  command's other stores still apply;
* one agent uses at most 10 distinct labels across its definition
  (:func:`check_definition_labels`, called when a definition is uploaded).

Within a run the last command wins per ``(agent, label)``; within one command deletes come
before stores, so a command that deletes and stores one label leaves it stored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from search2o.errors import InputError
from search2o.memory.model import Rejection
from search2o.memory.settings import MemorySettings
from search2o.textrules import text_problem as text_rule_problem

__all__ = [
    "MAX_AGENT_CHARS",
    "MAX_LABELS_PER_AGENT",
    "MAX_LABEL_CHARS",
    "MAX_STORES_PER_COMMAND",
    "MemoryChanges",
    "check_agent",
    "check_definition_labels",
    "check_label",
    "text_problem",
]

MAX_STORES_PER_COMMAND = 25
MAX_LABELS_PER_AGENT = 10
MAX_AGENT_CHARS = 100
MAX_LABEL_CHARS = 64

_NAME = re.compile(r"\w[\w.-]*")
_DEFAULT_MAX_TEXT_CHARS: int = MemorySettings.model_fields["max_text_chars"].default


def _check_name(value: object, field: str, what: str, longest: int) -> str:
    if not isinstance(value, str) or len(value) > longest or not _NAME.fullmatch(value):
        shown = repr(value) if isinstance(value, str) else type(value).__name__
        raise InputError(
            field,
            f"{shown} is not {what} (letters, digits, '_', '.', '-', starting with a letter, "
            f"digit or '_'; at most {longest} characters)",
        )
    return value


def check_agent(agent: object, field: str = "agentName") -> str:
    """Return ``agent`` if it is a valid agent name.

    Raises:
        InputError: ``field``, naming the value and the rule.

    """
    return _check_name(agent, field, "an agent name", MAX_AGENT_CHARS)


def check_label(label: object, field: str = "label") -> str:
    """Return ``label`` if it is a valid memory label.

    Raises:
        InputError: ``field``, naming the value and the rule.

    """
    return _check_name(label, field, "a memory label", MAX_LABEL_CHARS)


def check_definition_labels(labels: Iterable[str], field: str = "memory") -> list[str]:
    """Check the literal labels one agent definition uses; return them distinct, in order.

    The Agent Engine calls this when a definition is uploaded, with every label of every
    ``memory`` command's ``store``, ``delete`` and ``label`` fields.

    Raises:
        InputError: ``field``: a label is malformed, or there are more than 10 distinct ones.

    """
    distinct: list[str] = []
    for label in labels:
        check_label(label, field)
        if label not in distinct:
            distinct.append(label)
    if len(distinct) > MAX_LABELS_PER_AGENT:
        raise InputError(
            field,
            f"an agent uses at most {MAX_LABELS_PER_AGENT} distinct memory labels, found "
            f"{len(distinct)}: {', '.join(distinct)}",
        )
    return distinct


def text_problem(text: str, max_chars: int) -> str | None:
    """Return why ``text`` cannot be stored (empty, too long, not valid Unicode), or ``None``."""
    if not text.strip():
        return "must not be empty"
    if len(text) > max_chars:
        return f"is {len(text)} characters; at most {max_chars} (memory.max_text_chars)"
    return text_rule_problem(text)


class MemoryChanges:
    """The stores and deletes a run recorded, applied only when the run completes.

    Args:
        max_text_chars: longer texts are rejected (``MemoryStore.new_changes`` passes the
            configured ``memory.max_text_chars``).
        validation: a validation run: commands are checked, nothing is ever applied.

    Attributes:
        vectors: embeddings of texts to store, by embedded text (filled by
            ``MemoryStore.prepare`` before the transaction, so it stays short).
        vectors_model: the embedding model that made ``vectors``.
        retrieved: ids of memories the run's searches returned; :meth:`MemoryStore.apply`
            records their retrieval time with the run's state.

    """

    def __init__(
        self, *, max_text_chars: int = _DEFAULT_MAX_TEXT_CHARS, validation: bool = False
    ) -> None:
        self.max_text_chars = max_text_chars
        self.validation = validation
        self._pending: dict[tuple[str, str], str | None] = {}
        self._rejected: list[Rejection] = []
        self.vectors: dict[str, npt.NDArray[np.float32]] = {}
        self.vectors_model: str | None = None
        self.retrieved: set[int] = set()

    def note_retrieved(self, ids: Iterable[int]) -> None:
        """Remember that a search of this run returned the memories ``ids``."""
        if not self.validation:
            self.retrieved.update(ids)

    def record(
        self,
        agent: str,
        *,
        store: Mapping[str, str] | None = None,
        delete: Iterable[str] | None = None,
    ) -> list[Rejection]:
        """Record one ``memory`` command of ``agent``: its ``store`` and ``delete`` fields.

        Args:
            agent: the running agent's name (a memory is keyed by the agent that stored it).
            store: label -> text (dynamic strings already evaluated); at most 25 labels.
            delete: labels to delete; at most 25.

        Returns:
            The stores of this command refused for their label only (empty, too long, not
            valid Unicode); the others are recorded.

        Raises:
            InputError: the command is malformed (field ``agentName``, ``store``,
                ``store.<label>`` or ``delete``); nothing of it is recorded.

        """
        check_agent(agent)
        stores = self._check_store(store)
        deletes = self._check_delete(delete)
        rejected: list[Rejection] = []
        for label in deletes:
            self._pending.pop((agent, label), None)
            self._pending[(agent, label)] = None
        for label, text in stores.items():
            problem = text_problem(text, self.max_text_chars)
            if problem is not None:
                rejected.append(Rejection(agent, label, problem))
                continue
            self._pending.pop((agent, label), None)  # the latest command goes last
            self._pending[(agent, label)] = text
        self._rejected.extend(rejected)
        return rejected

    @staticmethod
    def _check_store(store: Mapping[str, str] | None) -> dict[str, str]:
        if store is None:
            return {}
        if not isinstance(store, Mapping):
            raise InputError("store", "must be an object of label -> text")
        if len(store) > MAX_STORES_PER_COMMAND:
            raise InputError(
                "store",
                f"stores {len(store)} labels; at most {MAX_STORES_PER_COMMAND} in one command",
            )
        checked: dict[str, str] = {}
        for label, text in store.items():
            check_label(label, "store")
            if not isinstance(text, str):
                raise InputError(f"store.{label}", f"must be a string, got {type(text).__name__}")
            checked[label] = text
        return checked

    @staticmethod
    def _check_delete(delete: Iterable[str] | None) -> list[str]:
        if delete is None:
            return []
        if isinstance(delete, str | bytes) or not isinstance(delete, Iterable):
            raise InputError("delete", "must be a list of labels")
        labels = [check_label(label, "delete") for label in delete]
        if len(labels) > MAX_STORES_PER_COMMAND:
            raise InputError(
                "delete",
                f"deletes {len(labels)} labels; at most {MAX_STORES_PER_COMMAND} in one command",
            )
        return list(dict.fromkeys(labels))

    @property
    def pending(self) -> dict[tuple[str, str], str | None]:
        """The final operation per ``(agent, label)``: the text to store, or ``None`` to delete."""
        return dict(self._pending)

    @property
    def rejected(self) -> tuple[Rejection, ...]:
        """Every store refused so far, in order."""
        return tuple(self._rejected)

    def __bool__(self) -> bool:
        """Return whether something is to be stored or deleted."""
        return bool(self._pending)
