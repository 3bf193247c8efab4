"""Slack on the shared delivery store, on SQLite and PostgreSQL: its own rows, its own buttons."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from search2o.config import Settings
from search2o.runtime import Runtime
from search2o.storage.delivery_models import SurfaceDelivery
from search2o.storage.job_models import Job
from search2o.surfaces.deliveries import Inbound
from search2o.surfaces.slack.pipeline import SlackPipeline
from search2o.surfaces.slack.settings import SlackSettings
from search2o.surfaces.slack.surface import store
from tests.surfaces.slack.fake_slack import TEAM, event_callback, message_event

TS = "1700000801.000100"


@pytest.fixture
def settings(tmp_path_factory: pytest.TempPathFactory, database_url: str) -> Settings:
    """Settings with Slack configured, so the queue knows ``slack.answer`` and ``slack.rate``."""
    return Settings(
        data_dir=tmp_path_factory.mktemp("data"),
        database_url=database_url,
        slack={"bot_token": "xoxb-test", "signing_secret": "s" * 32, "mode": "http"},
    )


@pytest.fixture
def pipeline(runtime: Runtime) -> SlackPipeline:
    return SlackPipeline(SlackSettings(), store(runtime), runtime.jobs)


def telegram_twin(channel: str) -> Inbound:
    """A Telegram question whose workspace, channel and keys are spelled like a Slack one's."""
    return Inbound(
        surface="telegram",
        workspace=TEAM,
        channel=channel,
        channel_type="private",
        user="U1",
        message_key=TS,
        event_key="EvShared",
        thread_key=TS,
        text="a Telegram question",
    )


def rate_jobs(runtime: Runtime) -> list[Job]:
    with runtime.database.session() as session:
        return list(session.scalars(select(Job).where(Job.kind == "slack.rate")))


def click(delivery: int, channel: str) -> dict[str, object]:
    return {
        "type": "block_actions",
        "team": {"id": TEAM},
        "channel": {"id": channel},
        "actions": [
            {
                "action_id": "search2o_feedback_up",
                "value": f"{delivery}:up",
                "action_ts": "1700000999.1",
            }
        ],
    }


def test_a_slack_question_is_a_slack_row_of_the_shared_table_beside_telegrams(
    pipeline: SlackPipeline, runtime: Runtime
) -> None:
    twin, _ = pipeline.store.record(telegram_twin("D7"))
    dm = message_event("What is our leave policy?", TS, channel="D7", channel_type="im")
    outcome = pipeline.take_event(event_callback(dm, "EvShared"))
    # the same ids under another surface are another question
    assert outcome.status == "answered" and outcome.delivery != twin
    assert pipeline.take_event(event_callback(dm, "EvShared")).status == "duplicate"
    with runtime.database.session() as session:
        rows = {r.id: r.surface for r in session.scalars(select(SurfaceDelivery))}
    assert rows == {twin: "telegram", outcome.delivery: "slack"}
    assert outcome.delivery is not None
    loaded = pipeline.store.load(outcome.delivery)
    assert loaded is not None and loaded.inbound.direct  # Slack's "im" is a direct message
    assert loaded.inbound.text == "What is our leave policy?"
    # a thread only Telegram answers in is not one Slack follows without a mention
    pipeline.store.record(telegram_twin("C9"))
    assert pipeline.store.knows_thread("slack", TEAM, "D7", TS)
    assert not pipeline.store.knows_thread("slack", TEAM, "C9", TS)
    follow_up = message_event("and sick leave?", "1700000803.000100", channel="C9", thread_ts=TS)
    assert pipeline.take_event(event_callback(follow_up, "EvFollow")).status == "ignored"


def test_a_slack_button_naming_another_surfaces_delivery_is_ignored(
    pipeline: SlackPipeline, runtime: Runtime
) -> None:
    twin, _ = pipeline.store.record(telegram_twin("C1"))
    assert pipeline.take_interaction(click(twin, "C1")).status == "ignored"
    assert rate_jobs(runtime) == []
    # the control: a Slack answer of the same channel is rated
    mention = message_event("<@UBOT> hello", "1700000802.000100", kind="app_mention")
    mine = pipeline.take_event(event_callback(mention, "EvMine")).delivery
    assert mine is not None
    assert pipeline.take_interaction(click(mine, "C1")).status == "rated"
    assert len(rate_jobs(runtime)) == 1
