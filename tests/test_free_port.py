"""The test helper ``free_port`` hands out ports the kernel will not give to anyone else."""

from __future__ import annotations

import socket

from tests.conftest import _ephemeral_ports, free_port


def test_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    low, _ = _ephemeral_ports()
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(10_000 <= port < low for port in ports)
    with socket.socket() as server:
        server.bind(("127.0.0.1", ports[-1]))


def test_a_port_in_use_is_skipped() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", free_port() + 1))
        busy.listen()
        taken = busy.getsockname()[1]
        assert free_port() != taken
        assert free_port() != taken
