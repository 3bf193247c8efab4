"""The Slack surface: answers in threads, acknowledged at once, exactly once (docs/slack.md).

Ingress in both of Slack's modes feeds one pipeline (:class:`SlackPipeline`): verify →
normalise → dedupe → record → enqueue → acknowledge. The answer is a job
(:class:`SlackAnswerer`) that calls our API through :mod:`search2o.client` with a surface
token and posts in the thread. It needs the ``slack`` extra (``pip install
'search2o[slack]'``): importing this package without it raises
:class:`~search2o.errors.ConfigError` saying so.
"""

from search2o.errors import ConfigError

try:
    import slack_sdk  # noqa: F401 - only checked here; the modules below use it
except ImportError as exc:  # pragma: no cover - the extra is installed wherever tests run
    raise ConfigError(
        f"the Slack surface needs the `slack` extra ({exc.name} is not installed): "
        "pip install 'search2o[slack]'"
    ) from exc

from search2o.surfaces.slack.answer import SlackAnswerer
from search2o.surfaces.slack.events import normalise_event
from search2o.surfaces.slack.ingress import EVENTS_PATH, INTERACTIONS_PATH, SlackIngress
from search2o.surfaces.slack.pipeline import ANSWER, RATE, SlackPipeline
from search2o.surfaces.slack.surface import add_slack_kinds, connect, server_url, store

__all__ = [
    "ANSWER",
    "EVENTS_PATH",
    "INTERACTIONS_PATH",
    "RATE",
    "SlackAnswerer",
    "SlackIngress",
    "SlackPipeline",
    "add_slack_kinds",
    "connect",
    "normalise_event",
    "server_url",
    "store",
]
