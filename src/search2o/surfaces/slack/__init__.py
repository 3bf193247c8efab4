"""The Slack surface: answers in threads, acknowledged at once, exactly once (docs/slack.md).

Ingress in both of Slack's modes feeds one pipeline (:class:`SlackPipeline`): verify →
normalise → dedupe → record → enqueue → acknowledge. The answer is a job
(:class:`SlackAnswerer`) that calls our API through :mod:`search2o.client` with a surface
token and posts in the thread. It needs the ``slack`` extra (``pip install
'search2o[slack]'``): using it without it raises
:class:`~search2o.errors.ConfigError` saying so.

Modules are imported by their full names: this package re-exports nothing, so its extension
(:mod:`.extension`) and settings load without the rest of it.
"""
