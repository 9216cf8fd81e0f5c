"""The kernel server of ``make live``: ``jupyter_server`` that answers the book's origin alone.

``jupyter_server`` skips its origin check for token-authenticated requests, so
that a page of any site that holds the token could start kernels.  Here every
request (REST, websocket, CORS preflight) whose ``Origin`` header is present
and is not ``ServerApp.allow_origin`` (the book's origin) is refused with 403
before it is authenticated; requests without ``Origin`` (scripts, the book's
own tests) still need the token.  The token is the only credential: no login
cookie is set or read (a browser sends the cookies of 127.0.0.1 to every port
of it, that is to any local user's server).  Every response also forbids framing
(``X-Frame-Options: DENY``; ``jupyter_server`` already sends
``Content-Security-Policy: frame-ancestors 'self'``).

The server also proves that it is the one ``live_server.py`` started, before that script
sends it anything: ``GET /aim-live/proof?nonce=N`` answers ``HMAC-SHA256(key, N)`` with the key
that ``live_server.py`` made and passed in the environment (:data:`PROOF_KEY_ENV`, removed from
this process's environment at start, so the kernels do not inherit it; the environment of a
process is readable by its own user only).  Another local user who holds the kernel port cannot
answer, and is sent neither the token nor the book's address.

``book/_ext/live_server.py`` runs ``python book/_ext/live_origin.py
[jupyter_server options]``.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import re
import sys

from jupyter_server.auth import IdentityProvider
from jupyter_server.auth.decorator import allow_unauthenticated
from jupyter_server.serverapp import ServerApp
from tornado import web

PROOF_PATH = "/aim-live/proof"
PROOF_KEY_ENV = "AIM_LIVE_PROOF_KEY"


def proof(key: bytes, nonce: str) -> str:
    """``HMAC-SHA256(key, nonce)`` in hex: what the kernel server answers to the challenge ``nonce``."""
    return hmac.new(key, nonce.encode(), hashlib.sha256).hexdigest()


class BookOriginIdentityProvider(IdentityProvider):
    """The token identity provider of ``jupyter_server``, behind a strict origin check."""

    def get_user(self, handler: web.RequestHandler):
        """Refuse (403) a request from a foreign origin; otherwise authenticate it as usual.

        Parameters
        ----------
        handler : tornado.web.RequestHandler
            The handler of the request; ``handler.settings["allow_origin"]`` is the book's origin.
        """
        origin = handler.request.headers.get("Origin")
        if origin is not None and origin != handler.settings.get("allow_origin"):
            raise web.HTTPError(403, "requests from origin %s are refused", origin)
        return super().get_user(handler)

    def get_user_cookie(self, handler: web.RequestHandler) -> None:
        """No user from a cookie: the token is the only credential."""
        return None

    def set_login_cookie(self, handler: web.RequestHandler, user) -> None:
        """Set no login cookie (see :meth:`get_user_cookie`)."""


class ProofHandler(web.RequestHandler):
    """``GET PROOF_PATH?nonce=N`` (``N``: 32 to 128 hex digits) answers :func:`proof` of ``N``; it reveals
    nothing else and needs no token (the one who asks has not yet trusted this server)."""

    def initialize(self, key: bytes):
        self._key = key

    @allow_unauthenticated
    def get(self):
        nonce = self.get_argument("nonce", "")
        if not re.fullmatch(r"[0-9a-f]{32,128}", nonce):
            raise web.HTTPError(400, "nonce: 32 to 128 hex digits")
        self.set_header("Cache-Control", "no-store")
        self.finish(proof(self._key, nonce))


class BookServerApp(ServerApp):
    """``jupyter_server`` with :class:`ProofHandler` at :data:`PROOF_PATH` (key: :attr:`proof_key`)."""

    proof_key = b""

    def init_webapp(self) -> None:
        super().init_webapp()
        self.web_app.add_handlers(".*$", [(PROOF_PATH, ProofHandler, {"key": self.proof_key})])


def main(argv: list[str] | None = None) -> None:
    """Run ``jupyter_server`` with ``argv`` (its options), the origin check, the frame header and the proof."""
    key = os.environ.pop(PROOF_KEY_ENV, "")
    if len(key) < 32:
        sys.exit(f"live_origin: {PROOF_KEY_ENV} is unset; run book/_ext/live_server.py, which sets it")
    BookServerApp.proof_key = key.encode()
    BookServerApp.launch_instance(argv, identity_provider_class=BookOriginIdentityProvider,
                                  tornado_settings={"headers": {"X-Frame-Options": "DENY"}})


if __name__ == "__main__":
    main()
