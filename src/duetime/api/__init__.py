"""duetime's REST API (FastAPI): :func:`create_api` builds it over an open
:class:`~duetime.app.AsyncApp`; :class:`ApiServer` serves it with uvicorn in a running loop.
docs/api.md describes the resources, errors, auth and rate limits."""

from duetime.api.factory import create_api
from duetime.api.http_server import ApiServer, ListenError, is_loopback

__all__ = ["ApiServer", "ListenError", "create_api", "is_loopback"]
