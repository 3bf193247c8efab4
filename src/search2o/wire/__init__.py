"""The wire contract: what the server and its clients both import, and nothing of either.

Request and response bodies (:mod:`.chat`, :mod:`.schemas`, :mod:`.surfaces`, :mod:`.runs`),
the field rules they share (:mod:`.fields`), the name rules of surfaces (:mod:`.names`) and
the HTTP status of each error class (:mod:`.errors`). The API (:mod:`search2o.api`) serves
these models and :mod:`search2o.client` parses them, so a surface can run as its own process
with the client alone. Modules here import pydantic and :mod:`search2o.errors` /
:mod:`search2o.textrules` only (the import contract in ``pyproject.toml``).
"""
