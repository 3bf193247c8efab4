"""Which network peers and addresses count as this machine: the one loopback rule.

The server's local single-user mode, plain-``http://`` state hooks and the plain-``http://`` key
service are each allowed only on loopback; all of them ask :func:`is_loopback_host`, so an
address accepted in one place is accepted in all.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["is_loopback_host", "url_problem"]


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


def url_problem(url: str, *, secure: bool, query: bool = True) -> str | None:
    """Return why ``url`` may not be a configured endpoint, or ``None`` when it may.

    The one URL policy for every URL a setting holds (RFC 3986 syntax):

    * an ``http`` or ``https`` URL with a host, no user name or password in it (credentials
      go in their own settings, so they never reach a log line with the URL);
    * with ``secure`` (the URL carries secrets or conversation content: state hooks, the key
      service, a messenger's API), ``https`` unless the host is loopback
      (:func:`is_loopback_host`) — so ``http://127.0.0.2`` is accepted wherever
      ``http://127.0.0.1`` is;
    * with ``query=False``, no query string or fragment (a base URL that paths are joined to).

    Args:
        url: the configured value.
        secure: whether plain ``http`` is refused beyond loopback.
        query: whether a query or fragment is allowed.

    """
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or ""
        _ = parts.port  # raises ValueError for a port out of range
    except ValueError:
        return f"{url!r} is not a URL"
    if parts.scheme not in ("http", "https") or not host:
        return f"{url!r} must be an http(s) URL with a host"
    if parts.username is not None or parts.password is not None:
        return "must not hold a user name or password (they belong in their own settings)"
    if not query and (parts.query or parts.fragment):
        return f"{url!r} must not have a query or fragment"
    if secure and parts.scheme == "http" and not is_loopback_host(host):
        return (
            f"{url!r} uses plain http to a remote host; what travels there is secret, so use "
            "https (http is allowed to loopback only)"
        )
    return None
