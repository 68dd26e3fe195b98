"""The refresh grace window: two refreshes with one refresh token, close together, get the same answer.

A client whose refresh answer was lost, or two tabs of one client refreshing at once, send the same refresh
token twice. Rotation revokes it at the first use, and reuse protection revokes the whole grant at the
second: the client is signed out. DOT's own grace period answers the second with the earlier tokens *by
value*, which hashed token storage no longer has. So the token view keeps the first answer instead:

- the refresh of a token is done by one request at a time, site-wide, even with no window (DOT answered two
  concurrent refreshes of one token with a 200 and a 500) (a lock in the default cache, keyed by
  the token's checksum); a second one waits for the first's answer;
- a successful answer is kept for ``MCP_SERVER["OAUTH_REFRESH_GRACE"]`` seconds (default 10), encrypted
  (Fernet) with a key derived from the old refresh token itself (HKDF-SHA256): the cache never holds a
  usable token, and only a holder of the old refresh token can read the answer;
- a second refresh inside the window, authenticated as the same client, gets the same answer while its
  access token still exists; after the window, or from another client, the replay revokes the whole grant
  as DOT does (``REFRESH_TOKEN_REUSE_PROTECTION``) and the kept answer is dropped.

The cache must be shared by every worker (Redis) for the window to span workers.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse

from ..conf import mcp_settings

__all__ = ["LOCK_SECONDS", "RefreshGrace", "authenticated_client", "replayed", "still_live"]

LOCK_SECONDS = 10.0
"""Longest a refresh holds its token's lock (and a second request waits for its answer)."""

POLL = 0.02
"""Seconds between two looks at the cache by a refresh waiting for another one's answer."""


def _fernet(plain: str) -> Fernet:
    kdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"mcp-oauth-refresh-grace")
    return Fernet(base64.urlsafe_b64encode(kdf.derive(plain.encode())))


class RefreshGrace:
    """The grace of one refresh request (``grant_type=refresh_token``) with the token ``plain``."""

    def __init__(self, plain: str) -> None:
        self.plain = plain
        checksum = hashlib.sha256(plain.encode()).hexdigest()
        self.answer_key = "mcp-oauth-refreshed:" + checksum
        self.lock_key = "mcp-oauth-refreshing:" + checksum
        self.window = float(mcp_settings.OAUTH_REFRESH_GRACE or 0)
        self.locked = False

    def earlier(self) -> tuple[str, bytes] | None:
        """``(client_id, body)`` of the answer kept for this token, or ``None``."""
        sealed = cache.get(self.answer_key)
        if not isinstance(sealed, bytes):
            return None
        try:
            kept = json.loads(_fernet(self.plain).decrypt(sealed, ttl=max(1, int(self.window + 1))))
        except (InvalidToken, ValueError):
            return None
        return str(kept["client_id"]), str(kept["body"]).encode()

    def acquire(self) -> tuple[str, bytes] | None:
        """Take the token's lock; while another request holds it, wait for that one's answer (returned)."""
        deadline = time.monotonic() + LOCK_SECONDS
        while not cache.add(self.lock_key, 1, LOCK_SECONDS):
            kept = self.earlier()
            if kept is not None:
                return kept
            if time.monotonic() > deadline:
                return None  # a refresh that outlived its lock: go on without one
            time.sleep(POLL)
        self.locked = True
        return self.earlier()  # the first answer may have landed just before the lock was taken

    def forget(self) -> None:
        """Drop the kept answer (another client presented the token: the grant is revoked)."""
        cache.delete(self.answer_key)

    def keep(self, client_id: str, response: HttpResponse) -> None:
        """Keep a successful answer for the window, sealed with the old token."""
        if response.status_code != 200 or not client_id or self.window <= 0:
            return
        body = response.content.decode()
        sealed = _fernet(self.plain).encrypt(json.dumps({"client_id": client_id, "body": body}).encode())
        cache.set(self.answer_key, sealed, self.window)

    def release(self) -> None:
        if self.locked:
            cache.delete(self.lock_key)
            self.locked = False


def still_live(body: bytes) -> bool:
    """Whether the access token of a kept answer still exists (the grant was not revoked meanwhile)."""
    from oauth2_provider.models import get_access_token_model

    access = str(json.loads(body).get("access_token") or "")
    checksum = hashlib.sha256(access.encode()).hexdigest()
    return bool(access) and get_access_token_model().objects.filter(token_checksum=checksum).exists()


def replayed(body: bytes) -> HttpResponse:
    """The kept answer, sent again as DOT sends a token answer."""
    response = HttpResponse(body, status=200, content_type="application/json")
    response["Cache-Control"] = "no-store"
    response["Pragma"] = "no-cache"
    return response


def authenticated_client(view: Any, request: HttpRequest) -> str | None:
    """The ``client_id`` the token request authenticates as (as oauthlib's refresh grant checks it: the
    secret of a confidential client, the id of a public one), or ``None``."""
    from oauthlib.common import Request as OAuthRequest

    core = view.get_oauthlib_core()
    uri, method, body, headers = core._extract_params(request)
    oauth_request = OAuthRequest(uri, method, body, headers)
    validator = view.get_validator_class()()
    if validator.client_authentication_required(oauth_request):
        known = validator.authenticate_client(oauth_request)
    else:
        known = validator.authenticate_client_id(oauth_request.client_id, oauth_request)
    client = getattr(oauth_request, "client", None)
    return str(client.client_id) if known and client is not None else None
