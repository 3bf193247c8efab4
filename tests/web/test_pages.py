"""Every page in light and dark themes and at 375 px: screenshots, and axe-core finds no
serious or critical accessibility violation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.web.conftest import ROOT, Site, shot

pytestmark = pytest.mark.slow

AXE = ROOT / "web" / "node_modules" / "axe-core" / "axe.min.js"
RUN_AXE = """async () => {
  const result = await axe.run(document, {resultTypes: ["violations"]});
  return result.violations.map(v => ({id: v.id, impact: v.impact,
    targets: v.nodes.map(n => n.target.join(" ")).slice(0, 5)}));
}"""
VIEWS = {
    "light": {"viewport": {"width": 1280, "height": 860}, "color_scheme": "light"},
    "dark": {"viewport": {"width": 1280, "height": 860}, "color_scheme": "dark"},
    "375px": {
        "viewport": {"width": 375, "height": 740},
        "color_scheme": "light",
        "is_mobile": True,
    },
}


@pytest.fixture(scope="module")
def conversation(site: Site) -> str:
    answer = httpx.post(
        site.url + "/v1/chat",
        json={"message": "How many vacation days do we get each year?", "stream": False},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["conversation_id"])


def _pages(conversation: str) -> dict[str, str]:
    return {
        "chat-new": "/",
        "chat-answer": f"/c/{conversation}",
        "memories": "/memories",
        "devices": "/devices",
        "admin-documents": "/admin/documents",
        "admin-agents": "/admin/agents",
        "admin-users": "/admin/users",
        "admin-feedback": "/admin/feedback",
        "admin-settings": "/admin/settings",
    }


def serious(page: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = page.evaluate(RUN_AXE)
    return [v for v in found if v["impact"] in ("serious", "critical")]


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_every_page_is_accessible(browser: Any, site: Site, conversation: str, view: str) -> None:
    from playwright.sync_api import expect

    assert AXE.exists(), f"{AXE} is missing: npm ci in web/"
    context = browser.new_context(**VIEWS[view])
    context.add_init_script(path=str(AXE))  # evaluated by the browser, outside the page's CSP
    page = context.new_page()
    problems: dict[str, Any] = {}
    for name, path in _pages(conversation).items():
        page.goto(site.url + path)
        expect(page.locator("main h1, main h2").first).to_be_visible()
        if name == "chat-answer":
            expect(page.locator("article.answer .cite-chip").first).to_be_visible()
        if name.startswith("admin"):
            expect(page.get_by_role("navigation", name="Administration")).to_be_visible()
        page.wait_for_load_state("networkidle")
        shot(page, f"{name}-{view}")
        found = serious(page)
        if found:
            problems[name] = found
    # The shortcuts dialog and the retrieval trace drawer are pages of their own to a reader.
    page.goto(site.url + f"/c/{conversation}")
    # The answer is shown once the app has mounted, and with it its keyboard listener.
    expect(page.locator("article.answer .cite-chip").first).to_be_visible()
    page.keyboard.press("Control+/")
    expect(page.get_by_role("dialog", name="Keyboard shortcuts")).to_be_visible()
    shot(page, f"shortcuts-{view}")
    if found := serious(page):
        problems["shortcuts"] = found
    page.keyboard.press("Escape")
    page.get_by_role("button", name="How this answer was found").click()
    drawer = page.get_by_role("dialog", name="How this answer was found")
    expect(drawer).to_contain_text("search_knowledge")
    shot(page, f"trace-{view}")
    if found := serious(page):
        problems["trace"] = found
    assert problems == {}
    context.close()


def test_screenshots_folder_is_named_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "build/screenshots/" in readme
    assert Path(ROOT / ".gitignore").read_text().count("/build/") == 1
