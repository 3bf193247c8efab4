"""Helpers of the operations tests: reading a Prometheus scrape, a chat answer's events."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Parse a scrape (Prometheus text format) into ``{(name, sorted labels): value}``."""
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(text: str, name: str, **labels: str) -> float:
    """Return one sample of a scrape, 0 when it is absent (a counter not yet incremented)."""
    return samples(text).get((name, tuple(sorted(labels.items()))), 0.0)


def streamed_chat(client: httpx.Client, message: str, **headers: str) -> list[str]:
    """Send a streamed chat turn; return the event names of its answer, in order."""
    kinds: list[str] = []
    with client.stream(
        "POST", "/v1/chat", json={"message": message, "stream": True}, headers=headers
    ) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("event:"):
                kinds.append(line[6:].strip())
    return kinds
