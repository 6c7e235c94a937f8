"""Who a client is, for the per-client limits (`admission`'s share of the slots, `slow_path`'s budget).

A client is the address a request comes from, never its port: a sender opening many connections (from as
many source ports) is still one client. An IPv4 address is one client (an IPv4-mapped IPv6 address,
``::ffff:192.0.2.1``, is that IPv4 address). An IPv6 address is taken by its /64 network, the block a
single host or subscriber is given (RFC 6177): a host can pick any of its 2^64 addresses at will, so counting
them apart would give one sender as many budgets as it likes. A peer that is not an IP address (a Unix
socket, a test client) is one client by its name. Headers such as ``X-Forwarded-For`` are not read: anyone
can write them. So the senders behind one NAT or one collector share their limits; raise
`max_inflight_per_client` (and `slow_path_burst`) for a collector that forwards many agents.
"""

from __future__ import annotations

import ipaddress

IPV6_CLIENT_PREFIX = 64  # the bits of an IPv6 address that name one client


def client_key(address: str) -> str:
    """The client an address belongs to (see the module docstring): the IPv4 address, the IPv6 /64
    network, or the address itself when it is not an IP address."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, IPV6_CLIENT_PREFIX), strict=False))
    return str(ip)
