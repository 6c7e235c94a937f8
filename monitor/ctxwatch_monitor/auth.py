"""Optional bearer-token authentication for ingest, the JSON API and (optionally) /metrics.

The expected token is compared with `hmac.compare_digest`, so the comparison time does not reveal
how much of a guess was right. Without a configured token every request is allowed.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, HTTPException
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

_bearer = HTTPBearer(auto_error=False, description="The monitor's token (--token), when one is configured.")
CHALLENGE = {"WWW-Authenticate": 'Bearer realm="ctxwatch-monitor"'}


class BearerAuth:
    """Checks `Authorization: Bearer <token>` against the configured token."""

    def __init__(self, token: str | None) -> None:
        self._expected = token.encode() if token else None

    def allows(self, authorization: str | None) -> bool:
        """Whether an Authorization header value carries the token (always, when none is configured)."""
        if self._expected is None:
            return True
        scheme, _, credentials = (authorization or "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(credentials.strip().encode(), self._expected)

    def dependency(self) -> Callable[..., Awaitable[None]]:
        """A FastAPI dependency raising 401 without the token (documents the scheme in OpenAPI)."""
        async def require_token(credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> None:
            header = f"Bearer {credentials.credentials}" if credentials is not None else None
            if not self.allows(header):
                raise HTTPException(401, "missing or wrong bearer token", headers=CHALLENGE)
        return require_token
