"""Connectors and the sync engine: company knowledge kept in sync with its sources.

An edge package (docs/architecture.md): it imports the core (the Knowledge Store, the job queue,
storage, crypto) and the core never imports it. :mod:`~search2o.connectors.contract` is the
contract every connector implements; :mod:`~search2o.connectors.engine` runs one sync;
:mod:`~search2o.connectors.sources` stores the configured sources; the ``folder`` connector
(:mod:`~search2o.connectors.folder`) is the first one. docs/connectors.md says how to use them
and how to write one.
"""
