"""The replay page in headless Chromium over the scripted KIP-101 stories (`kraftlab sim replay
--scenario ... --ui`): stepping moves frame by frame, "jump to the anomaly" lands on the frame
where the logs diverge and the page draws the two different records at one offset below both
high watermarks; with leader epochs the same story ends with agreeing logs and no divergence.
Screenshots are saved in the test's tmp dir."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By

from tests.ui.browser import browser, served, wait_for


def frame(driver: Any) -> int:
    return int(driver.find_element(By.TAG_NAME, "body").get_attribute("data-frame") or -1)


def cell_texts(driver: Any, replica: int) -> dict[int, str]:
    """offset -> the value drawn in broker `replica`'s row of t-0."""
    row = driver.find_element(By.CSS_SELECTOR, f'[data-partition="t-0"] [data-replica="{replica}"]')
    out = {}
    for cell in row.find_elements(By.CSS_SELECTOR, "rect.cell[data-offset]"):
        title = cell.find_element(By.TAG_NAME, "title").get_attribute("textContent")
        out[int(cell.get_attribute("data-offset"))] = title.rsplit("value ", 1)[-1]
    return out


def test_replay_steps_through_the_divergence_and_jumps_to_it(tmp_path: Path) -> None:
    with served(["sim", "replay", "--scenario", "kip101-divergence", "--ui"], tmp_path) as url, \
            browser() as driver:
        driver.get(url)
        wait_for(driver, lambda d: frame(d) == 0, 30, "the first frame")
        assert driver.find_element(By.ID, "frame-label").text == "frame 0 of 219 · 0 ms"
        step = driver.find_element(By.ID, "step")
        for expected in (1, 2, 3):
            step.click()
            wait_for(driver, lambda d, n=expected: frame(d) == n, 10, f"frame {expected}")
        jump = driver.find_element(By.ID, "jump-anomaly")
        jump.click()  # first the loss: the new leader's log ends below the HW seen before
        wait_for(driver, lambda d: frame(d) == 106, 10, "the loss frame")
        banner = driver.find_element(By.ID, "anomaly-banner")
        assert "committed offset 1 lost" in banner.text
        assert not driver.find_elements(By.CSS_SELECTOR, "rect.cell.diverged")
        jump.click()  # then the divergence
        wait_for(driver, lambda d: frame(d) == 117, 10, "the divergence frame")
        assert "replicas diverge below their high watermarks" in banner.text
        part = driver.find_element(By.CSS_SELECTOR, '[data-partition="t-0"]')
        assert part.get_attribute("data-anomaly") == "divergence"
        # Offset 1 is m1 on broker 1 and m2 on broker 2, both below HW 2, both outlined.
        assert cell_texts(driver, 1) == {0: "0", 1: "1"}
        assert cell_texts(driver, 2) == {0: "0", 1: "2"}
        diverged = driver.find_elements(By.CSS_SELECTOR, "rect.cell.diverged")
        assert sorted(c.get_attribute("data-offset") for c in diverged) == ["1", "1"]
        for replica in (1, 2):
            row = part.find_element(By.CSS_SELECTOR, f'[data-replica="{replica}"]')
            assert (row.get_attribute("data-leo"), row.get_attribute("data-hw")) == ("2", "2")
        current = driver.find_element(By.CSS_SELECTOR, "#timeline li.current")
        assert current.get_attribute("data-kind") == "anomaly"
        driver.save_screenshot(str(tmp_path / "replay-divergence.png"))


def test_with_leader_epochs_the_replay_plays_to_agreeing_logs(tmp_path: Path) -> None:
    with served(["sim", "replay", "--scenario", "kip101-divergence", "--leader-epoch", "true",
                 "--ui"], tmp_path) as url, browser() as driver:
        driver.get(url)
        wait_for(driver, lambda d: frame(d) == 0, 30, "the first frame")
        total = int(driver.find_element(By.ID, "scrub").get_attribute("max"))
        driver.find_element(By.CSS_SELECTOR, '#speed option[value="60"]').click()
        driver.find_element(By.ID, "play").click()
        wait_for(driver, lambda d: frame(d) == total, 30, "play to reach the last frame")
        assert cell_texts(driver, 1) == cell_texts(driver, 2) == {0: "0", 1: "2"}
        assert not driver.find_elements(By.CSS_SELECTOR, "rect.cell.diverged")
        kinds = {li.get_attribute("data-kind")
                 for li in driver.find_elements(By.CSS_SELECTOR, "#timeline li")}
        assert "truncation" in kinds  # broker 1 truncated to where epoch 0 ends on the leader
        statuses = driver.find_element(By.ID, "status").text
        assert "divergence" not in statuses and "loss" in statuses
        driver.save_screenshot(str(tmp_path / "replay-leader-epochs.png"))
