"""Which network peers and addresses count as this machine: the one loopback rule.

The server's local single-user mode, plain-``http://`` state hooks and the plain-``http://`` key
service are each allowed only on loopback; all of them ask :func:`is_loopback_host`, so an
address accepted in one place is accepted in all.
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback_host"]


def is_loopback_host(host: str) -> bool:
    """Return whether ``host`` names this machine's loopback interface.

    True for ``localhost`` (any case; RFC 6761 reserves it for loopback), any address of
    127.0.0.0/8 (RFC 1122 3.2.1.3), ``::1`` (RFC 4291 2.5.3), an IPv4-mapped IPv6 form of
    127.0.0.0/8 (``::ffff:127.0.0.1``, RFC 4291 2.5.5.2), with or without URL brackets
    (``[::1]``). False for anything else: other names (``localhost.example.com`` may resolve
    anywhere), the unspecified addresses ``0.0.0.0`` and ``::`` (they bind every interface),
    and the empty string.

    Args:
        host: a host name or IP address as it appears in a URL or a ``--host`` option.

    """
    name = host.strip()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback
