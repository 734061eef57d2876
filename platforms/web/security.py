"""What keeps the web platform's pages safe: headers, CSRF, the Origin check and a submit rate
limit per person (that only loopback is served without a configured secret is
:func:`bridge.web_links.loopback`'s, checked by :meth:`WebPlatform.check_bind
<platforms.web.WebPlatform.check_bind>`).

* **Headers** (:func:`secure`) on every response: a strict Content-Security-Policy (nothing but
  this origin's own CSS and JS, no inline script or style, no framing, forms posting only here),
  ``X-Frame-Options: DENY``, ``nosniff``, and ``Referrer-Policy: no-referrer`` -- the link's token
  is in the URL, and a referrer would hand it to any site the page linked to. Pages are
  ``no-store``: a shared computer's cache must not keep a person's form.
* **CSRF** (:class:`Csrf`): a form carries an HMAC of its link's token, keyed by the secret; a
  post without it, or with another's, changes nothing. Browsers also say where a post came from
  (``Origin``, ``Sec-Fetch-Site``): another site's post is refused even before that.
* **Rate limit** (:class:`RateLimit`): a token bucket per person, so a leaked link cannot be used
  to flood the store; per replica (state in memory), which bounds each replica's share.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections import OrderedDict
from collections.abc import Sequence
from urllib.parse import urlsplit

from aiohttp import web

CSP = (
    "default-src 'none'; style-src 'self'; script-src 'self'; connect-src 'self'; "
    "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}
_CSRF_CONTEXT = b"ask-bridge web csrf v1\n"


def secure(response: web.StreamResponse, *, cache: bool = False) -> web.StreamResponse:
    """``response`` with the headers every page carries (see the module); ``cache``: a static
    file, which may be kept (it holds nothing of anyone's)."""
    response.headers.update(HEADERS)
    response.headers["Cache-Control"] = "public, max-age=3600" if cache else "no-store"
    return response


class Csrf:
    """The hidden field a form carries: an HMAC of its link's token with the first secret; every
    secret verifies (so a rotation does not break forms already open)."""

    def __init__(self, secrets: Sequence[str]) -> None:
        self._keys = tuple(s.encode("utf-8") for s in secrets)

    def token(self, link_token: str) -> str:
        return self._mac(self._keys[0], link_token)

    def valid(self, link_token: str, given: str) -> bool:
        return any(hmac.compare_digest(self._mac(k, link_token), given) for k in self._keys)

    @staticmethod
    def _mac(key: bytes, link_token: str) -> str:
        return hmac.new(key, _CSRF_CONTEXT + link_token.encode("utf-8"), hashlib.sha256).hexdigest()


def same_origin(request: web.Request, public_url: str | None) -> bool:
    """Whether the browser says this post came from our own pages: ``Sec-Fetch-Site`` (when
    sent) is ``same-origin`` or ``none`` (typed, bookmarked), and ``Origin`` (when sent) names this
    host -- the one the request was sent to, or the public URL's (behind a proxy). A client that
    sends neither (not a browser) still needs the CSRF field."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("Origin")
    if origin is None:
        return True
    if origin == "null":
        # what a browser sends for a post from a page under ``Referrer-Policy: no-referrer``
        # (ours, by the Fetch standard): only its Sec-Fetch-Site can then say it was our own
        return site == "same-origin"
    hosts = {request.host}
    if public_url:
        hosts.add(urlsplit(public_url).netloc)
    return urlsplit(origin).netloc in hosts


class RateLimit:
    """A token bucket per person: ``burst`` submits at once, refilled at ``per_minute``; at most
    ``people`` buckets kept (the least recently used go: a full bucket is what a new one is)."""

    def __init__(self, per_minute: float = 10.0, burst: int = 10, people: int = 10_000) -> None:
        self.rate = per_minute / 60.0
        self.burst = float(burst)
        self.people = people
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def allow(self, who: str, now: float | None = None) -> bool:
        """Take one submit from ``who``'s bucket; ``False`` when it is empty."""
        now = time.monotonic() if now is None else now
        level, then = self._buckets.pop(who, (self.burst, now))
        level = min(self.burst, level + (now - then) * self.rate)
        allowed = level >= 1.0
        self._buckets[who] = (level - 1.0 if allowed else level, now)
        while len(self._buckets) > self.people:
            self._buckets.popitem(last=False)
        return allowed
