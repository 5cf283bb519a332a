"""A new user in a real browser (Debian's chromium driven by Playwright) against the real stack:
sign up, upload an op, wait for validation, start a run and watch live steps arrive."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import problem_source

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
SCREENSHOTS = (
    Path(os.environ.get("KERNELARENA_SCREENSHOTS", ""))
    if os.environ.get("KERNELARENA_SCREENSHOTS")
    else None
)


@pytest.fixture
def page(browser):
    return browser.new_page(viewport={"width": 1280, "height": 900})


def test_a_new_user_uploads_an_op_and_watches_the_agent_live(stack, page, tmp_path):
    page.set_default_timeout(30_000)
    page.goto(stack.base_url + "/accounts/signup/")
    page.fill("input[name=username]", "dana")
    page.fill("input[name=password1]", "a-long-enough-passphrase-42")
    page.fill("input[name=password2]", "a-long-enough-passphrase-42")
    page.click("button:has-text('Sign up')")
    page.wait_for_url(stack.base_url + "/")

    page.goto(stack.base_url + "/problems/new/")
    page.fill("input[name=title]", "relu then scale")
    page.fill("textarea[name=source]", problem_source("relu_scale"))
    page.click("button:has-text('Upload')")
    page.wait_for_url("**/problems/*/")
    # The page follows validation by itself; the run button enables once the op is valid.
    start = page.locator("button:has-text('Start a run')")
    start.wait_for(state="visible")
    page.wait_for_function(
        "() => { const b = [...document.querySelectorAll('button')]"
        ".find(b => b.textContent.includes('Start a run')); return b && !b.disabled; }",
        timeout=300_000,
    )
    page.select_option("select[name=agent]", "scripted-demo")
    start.click()
    page.wait_for_url("**/runs/*/")

    trace = page.locator("#trace > li")
    trace.nth(4).wait_for(timeout=120_000)  # live steps arrive while the run goes on
    # The run's end reloads the page once (its data-status then comes from the database), and
    # the reloaded page replays the trace; the trace state says so only after the last event.
    page.wait_for_function(
        "() => document.querySelector('#run').dataset.status === 'succeeded'"
        " && document.querySelector('#trace-state').textContent === 'run succeeded'",
        timeout=300_000,
    )
    kinds = page.locator("#trace").inner_text()
    assert "write_file" in kinds and "profile" in kinds
    shot = tmp_path / "run-page.png"
    page.screenshot(path=str(shot), full_page=True)
    if SCREENSHOTS:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, SCREENSHOTS / "run-page.png")
