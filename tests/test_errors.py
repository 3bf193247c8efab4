"""The exception hierarchy: one root, drawn in the docstring, each class mapped to one status."""

from __future__ import annotations

import inspect

import search2o
from search2o import errors
from search2o.api.errors import status_for
from search2o.wire.errors import STATUS_BY_ERROR


def _error_classes() -> list[type[errors.Search2oError]]:
    return [
        obj
        for _, obj in inspect.getmembers(errors, inspect.isclass)
        if issubclass(obj, errors.Search2oError)
    ]


def test_every_error_is_in_the_docstring_tree_and_mapped_to_a_status() -> None:
    doc = errors.__doc__ or ""
    for cls in _error_classes():
        assert cls.__name__ in doc, f"{cls.__name__} is missing from the tree in errors.py"
        assert cls in STATUS_BY_ERROR, f"{cls.__name__} has no HTTP status"


def test_status_follows_the_class() -> None:
    assert status_for(errors.InputError("query", "must not be empty")) == 422
    assert status_for(errors.NotFoundError("no document 3")) == 404
    assert status_for(errors.IndexMismatchError("run reindex")) == 409
    assert status_for(errors.AuthenticationError("bad token")) == 401


def test_input_error_names_field_and_reason() -> None:
    exc = errors.InputError("k", "must be between 1 and 100, got 0")
    assert exc.field == "k"
    assert str(exc) == "k: must be between 1 and 100, got 0"


def test_public_namespace_is_sorted_and_importable() -> None:
    assert search2o.__all__ == sorted(search2o.__all__)
    for name in search2o.__all__:
        assert getattr(search2o, name) is not None
    assert set(errors.__all__) == {c.__name__ for c in _error_classes()}
