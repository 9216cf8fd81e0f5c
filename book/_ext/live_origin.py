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

``book/_ext/live_server.py`` runs ``python book/_ext/live_origin.py
[jupyter_server options]``.
"""
from __future__ import annotations

from jupyter_server.auth import IdentityProvider
from jupyter_server.serverapp import ServerApp
from tornado import web


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


def main(argv: list[str] | None = None) -> None:
    """Run ``jupyter_server`` with ``argv`` (its options), the origin check and the frame header."""
    ServerApp.launch_instance(argv, identity_provider_class=BookOriginIdentityProvider,
                              tornado_settings={"headers": {"X-Frame-Options": "DENY"}})


if __name__ == "__main__":
    main()
