"""The public namespace of the job queue."""

from __future__ import annotations

import search2o.jobs as package


def test_the_public_names_are_sorted_and_resolve() -> None:
    assert package.__all__ == sorted(package.__all__)
    for name in package.__all__:
        assert getattr(package, name) is not None, name
    assert {"JobQueue", "JobRegistry", "JobContext", "JobInfo"} <= set(package.__all__)
