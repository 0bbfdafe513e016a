"""The UI as a person uses it, in a headless Chromium: a tiny trained and evaluated run, `hackable-rl
ui`, the runs table showing pass@1, a completion the verifier paid and the judge rejected at a chosen
step, reached from the traces page in at most three clicks, and the trace table's assessment columns
(the judge's verdict, the verifier's pay) whose filters leave exactly that step's paid-but-wrong
completions. Screenshots go to tmp_path; with HACKABLE_RL_SCREENSHOTS="$PWD/docs/images" (an absolute
folder: the test runs in a copy of the project) the filtered table's also goes there (docs/usage.md).

Slow (about a minute). Needs Debian's `chromium` and `chromium-driver` (`apt-get install chromium
chromium-driver`) and Selenium (the `dev` extra); nothing is downloaded at run time, and the test
skips, saying which is missing, where one is.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hackable_rl.cli import app
from hackable_rl.core.jsonl import read_jsonl
from hackable_rl.tracking.traces import step_trace_name, trace_id_of, verdict_of

pytestmark = pytest.mark.slow

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _paid_but_wrong_step(project: Path) -> int:
    """The last training step with a completion the verifier paid and the judge rejected (its trace is on
    the list's first page: newest first, after the evaluation's, each step's above its completions')."""
    for path in sorted((project / "cache/artifacts/runs").glob("*/generations/step-*.jsonl"), reverse=True):
        if any(verdict_of(row) == "PAID-WRONG" for row in read_jsonl(path)):
            return int(path.stem.split("-")[1])
    pytest.fail("the tiny run has no paid-but-wrong completion to look for")


def _paid_but_wrong_traces(project: Path, step: int) -> set[str]:
    """The trace ids of the step's paid-but-wrong completions (`tracking/traces.py`: one trace each)."""
    (run,) = (project / "cache/artifacts/runs").glob(f"*/generations/step-{step:05d}.jsonl")
    run_id = json.loads((run.parents[1] / "run.json").read_text())["mlflow_run_id"]
    return {trace_id_of(run_id, f"{step_trace_name(step)} #{index}")
            for index, row in enumerate(read_jsonl(run)) if verdict_of(row) == "PAID-WRONG"}


def _start_ui(project: Path, port: int, log: Path) -> tuple[subprocess.Popen, dict[str, str]]:
    """`hackable-rl ui` in the background; the pages it announces, once the server answers."""
    handle = log.open("w")
    server = subprocess.Popen([sys.executable, "-m", "hackable_rl", "ui", "--port", str(port)], cwd=project,
                              stdout=handle, stderr=subprocess.STDOUT, env={**os.environ}, start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                if answer.status == 200:
                    return server, dict(re.findall(r"^\s+(.+?): (http\S+)$", log.read_text(), re.M))
        except OSError:
            time.sleep(1)
    server.kill()
    pytest.fail(f"`hackable-rl ui` did not answer within 90 s:\n{log.read_text()}")


def _browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="Selenium is missing (pip install -e '.[dev]')")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1600,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)  # Debian's driver: no download
    driver.implicitly_wait(30)
    return driver


@pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None,
                    reason="Debian's chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)")
def test_a_person_finds_a_paid_but_wrong_completion_and_the_runs_pass_at_1(project, tmp_path):
    from selenium.webdriver.common.by import By

    runner = CliRunner()
    for command in (["train", "--set", "corruption.rate=0.5"], ["eval", "--configured-run", "--set", "corruption.rate=0.5"]):
        result = runner.invoke(app, command)
        assert result.exit_code == 0, result.output
    step = _paid_but_wrong_step(project)
    server, pages = _start_ui(project, _free_port(), tmp_path / "ui.log")
    driver = _browser()
    try:
        driver.get(pages["runs"])
        # a column, unasked (the header shows the key, or its last part under the section's name)
        assert driver.find_elements(By.XPATH, "//*[contains(normalize-space(text()), 'eval_pass_at_1')]")
        driver.save_screenshot(str(tmp_path / "1-runs.png"))

        driver.get(pages["generations (traces)"])
        clicks = 0
        for onboarding in driver.find_elements(By.XPATH, "//button[normalize-space()='Got it']"):
            onboarding.click()  # MLflow's one-time "Detect issues" tip covers the list on a first visit
            clicks += 1
        driver.find_element(By.XPATH, f"//*[starts-with(normalize-space(text()), 'step {step:05d} of')]").click()
        driver.find_element(By.XPATH, "//*[starts-with(normalize-space(text()), 'PAID-WRONG #')]").click()
        clicks += 2
        verdict = driver.find_element(By.XPATH, "//*[starts-with(normalize-space(text()), 'PAID-WRONG: reward')]")
        assert "judge wrong" in verdict.text and clicks <= 3
        completion = driver.find_element(By.XPATH, "//*[normalize-space(text())='completion']")
        driver.save_screenshot(str(tmp_path / "2-paid-but-wrong.png"))
        # completion and verdicts on one screen, nothing to scroll sideways to: inside the window's width
        width = driver.execute_script("return window.innerWidth")
        for element in (verdict, completion):
            box = driver.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.left, r.right]", element)
            assert 0 <= box[0] and box[1] <= width, (element.text, box, width)
        assert driver.execute_script("return document.scrollingElement.scrollWidth") <= width
        _filter_by_assessments(driver, pages["generations (traces)"], step, _paid_but_wrong_traces(project, step),
                               tmp_path)
    finally:
        driver.quit()
        os.killpg(server.pid, 15)
        server.wait(timeout=30)


def _filter_by_assessments(driver, traces_page: str, step: int, expected: set[str], shots: Path) -> None:
    """In MLflow's trace table, as a person filters it: Tag group = the step's trace, Feedback judge =
    false, Feedback verifier_paid = true; the rows left are exactly the step's paid-but-wrong completions,
    and the judge's verdict and the verifier's pay are columns."""
    from selenium.webdriver.common.by import By

    driver.set_window_size(2560, 760)  # every assessment column in view for the screenshot
    driver.get(traces_page)
    for close in driver.find_elements(By.XPATH, "//button[normalize-space()='Got it']"):
        close.click()
    for header in ("judge", "verifier", "verifier_paid", "verifier.m0", "reference"):
        assert driver.find_element(By.XPATH, f"//*[@role='columnheader'][normalize-space()='{header}']")
    driver.find_element(By.XPATH, "//button[@aria-label='Filters']").click()
    _filter_clause(driver, 0, "Tag", "group", step_trace_name(step))
    _filter_clause(driver, 1, "Feedback", "judge", "false")
    _filter_clause(driver, 2, "Feedback", "verifier_paid", "true")
    driver.find_element(By.XPATH, "//button[normalize-space()='Apply filters']").click()
    for assistant in driver.find_elements(By.XPATH, "//button[@aria-label='Close']"):
        if assistant.is_displayed():
            assistant.click()  # MLflow's assistant panel takes a third of the width
    deadline, shown = time.monotonic() + 60, set()
    while time.monotonic() < deadline and shown != expected:
        time.sleep(1)
        shown = {box.get_attribute("aria-label").removeprefix("Select trace ")
                 for box in driver.find_elements(By.XPATH, "//input[starts-with(@aria-label, 'Select trace ')]")}
    assert shown == expected, (sorted(shown), sorted(expected))
    driver.save_screenshot(str(shots / "3-paid-but-wrong-by-assessment.png"))
    if os.environ.get("HACKABLE_RL_SCREENSHOTS"):
        driver.save_screenshot(str(Path(os.environ["HACKABLE_RL_SCREENSHOTS"]) / "trace-table-paid-but-wrong.png"))


def _filter_clause(driver, index: int, field: str, key: str, value: str) -> None:
    """One row of the trace table's filter form: field, key (typed for a tag, chosen for feedback), `=`,
    value; a row after the first is added first."""
    from selenium.webdriver.common.by import By

    if index:
        driver.find_element(By.XPATH, "//button[normalize-space()='Add filter']").click()
    prefix = "web-shared.traces-table-filter"
    _choose(driver, f"{prefix}-field-{index}", field)
    key_box = driver.find_element(By.ID, f"{prefix}-key-{index}")
    if key_box.tag_name == "input":
        key_box.send_keys(key)
    else:
        _choose(driver, f"{prefix}-key-{index}", key)
    driver.find_element(By.ID, f"{prefix}-value-{index}").send_keys(value)


def _choose(driver, combobox: str, option: str) -> None:
    from selenium.webdriver.common.by import By

    driver.find_element(By.ID, combobox).click()
    driver.find_element(By.XPATH, f"//*[@role='option'][normalize-space()='{option}']").click()
