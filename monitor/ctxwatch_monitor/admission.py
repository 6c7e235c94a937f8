"""Admission control for ingest (`/v1/traces` and `/v1/metrics` alike): how many requests at once.

At most `limit` requests are admitted at once in all, and at most `per_client` from one client
(its address: `clients`), so a few slow or flooding senders cannot take every slot: the others keep
`limit - per_client` at least. What is refused gets 429 with `Retry-After`. Admitted bodies are
bounded (`max_body_bytes` each), so the memory they hold is at most `limit * max_body_bytes`.
Used from the event loop only.
"""

from __future__ import annotations


class Admission:
    """Counts admitted requests, in all and per client (`clients.client_key`); `enter` says whether one more fits."""

    def __init__(self, limit: int, per_client: int) -> None:
        self.limit, self.per_client = limit, min(per_client, limit)
        self.current = 0
        self._clients: dict[str, int] = {}

    def enter(self, client: str) -> str | None:
        """Admit one request from `client`; None when admitted, else why not (for the 429's message)."""
        if self.current >= self.limit:
            return f"more than {self.limit} export requests in flight"
        held = self._clients.get(client, 0)
        if held >= self.per_client:
            return f"more than {self.per_client} export requests in flight from this client"
        self._clients[client] = held + 1
        self.current += 1
        return None

    def leave(self, client: str) -> None:
        held = self._clients[client] - 1
        if held:
            self._clients[client] = held
        else:
            del self._clients[client]
        self.current -= 1
