"""The live page in headless Chromium on a real 3-controller, 3-broker cluster (`kraftlab ui`):
three brokers and a partition with its full ISR; a burst produced with acks=all from the page
moves every replica's LEO and HW; a follower killed from the page leaves the ISR (fenced after
its session times out), and started again from the page it comes back into the ISR. Every wait
polls the DOM with a deadline. Screenshots are saved in the test's tmp dir."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.live import broker_cluster, cli
from tests.ui.browser import browser, served, wait_for

pytestmark = pytest.mark.integration

BROKERS = ("101", "102", "103")
ISR_TIMEOUT_S = 60  # fencing after the 3 s session timeout, re-registration, catching up


def page(driver: Any) -> dict[str, Any]:
    """What the page shows now, read in one script (the page redraws a few times a second, so
    elements found in one call may be gone in the next)."""
    return driver.execute_script("""
        const part = document.querySelector('[data-partition="demo-0"]');
        const brokers = {};
        for (const card of document.querySelectorAll('#brokers .card[data-node]')) {
            brokers[card.dataset.node] = card.dataset.state;
        }
        const replicas = {};
        for (const g of part ? part.querySelectorAll('[data-replica]') : []) {
            replicas[g.dataset.replica] = {leo: Number(g.dataset.leo), hw: Number(g.dataset.hw),
                                           role: g.dataset.role, in_isr: g.dataset.inIsr};
        }
        return {brokers, replicas, leader: part ? part.dataset.leader : null,
                isr: part ? part.dataset.isr.split(',').filter(Boolean) : []};
    """)


def isr(driver: Any) -> set[str]:
    return set(page(driver)["isr"])


def broker_state(driver: Any, broker: str) -> str:
    return str(page(driver)["brokers"].get(broker))


def replicas(driver: Any) -> dict[str, tuple[int, int]]:
    """broker -> (LEO, HW) as drawn."""
    return {b: (r["leo"], r["hw"]) for b, r in page(driver)["replicas"].items()}


def timeline(driver: Any) -> str:
    return driver.find_element(By.ID, "timeline").text


def click(driver: Any, broker: str, action: str) -> None:
    driver.find_element(
        By.CSS_SELECTOR, f'#brokers [data-node="{broker}"] button[data-action="{action}"]').click()


def test_live_view_shows_a_follower_leave_the_isr_and_return(tmp_path: Path) -> None:
    with broker_cluster(tmp_path / "cluster") as cluster:
        cli(cluster, "topic", "create", "demo", "--partitions", "1", "--replication-factor", "3")
        with served(["ui", "--data-dir", str(cluster.data_dir)], tmp_path) as url, \
                browser() as driver:
            driver.get(url)
            wait_for(driver, lambda d: all(broker_state(d, b) == "up" for b in BROKERS), 30,
                     "three live, unfenced brokers")
            wait_for(driver, lambda d: isr(d) == set(BROKERS), 30, "demo-0 with its full ISR")
            roles = {c.get_attribute("data-role")
                     for c in driver.find_elements(By.CSS_SELECTOR, "#controllers .card")}
            assert "leader" in roles

            # A burst with acks=all: every replica ends with LEO = HW = 20 (followers learn
            # the HW one fetch later).
            driver.find_element(By.ID, "burst-count").clear()
            driver.find_element(By.ID, "burst-count").send_keys("20")
            driver.find_element(By.ID, "produce").click()
            wait_for(driver, lambda d: "produced 20/20 to demo-0 (acks=all"
                     in d.find_element(By.ID, "action-result").text, 30, "the burst's answer")
            wait_for(driver, lambda d: set(replicas(d).values()) == {(20, 20)}, 30,
                     "LEO and HW 20 on every replica")
            driver.save_screenshot(str(tmp_path / "live-full-isr.png"))

            leader = page(driver)["leader"]
            follower = next(b for b in BROKERS if b != leader)
            click(driver, follower, "kill")
            wait_for(driver, lambda d: broker_state(d, follower) == "down", 30,
                     f"broker {follower} down")
            wait_for(driver, lambda d: isr(d) == set(BROKERS) - {follower}, ISR_TIMEOUT_S,
                     f"broker {follower} out of the ISR")
            row = page(driver)["replicas"][follower]
            assert (row["in_isr"], row["role"]) == ("false", "down")
            text = timeline(driver)
            assert f"killed broker {follower}" in text
            assert "demo-0: ISR shrank to" in text and f"({follower} out)" in text

            # Writes go on without it (min.insync.replicas=1): the two others reach 40.
            driver.find_element(By.ID, "produce").click()
            wait_for(driver, lambda d: "offsets 20-39"
                     in d.find_element(By.ID, "action-result").text, 30, "the second burst")
            wait_for(driver, lambda d: {b: v for b, v in replicas(d).items() if b != follower}
                     == {b: (40, 40) for b in BROKERS if b != follower}, 30, "LEO and HW 40")
            assert replicas(driver)[follower] == (20, 20)  # as last seen
            driver.save_screenshot(str(tmp_path / "live-follower-killed.png"))

            click(driver, follower, "start")
            wait_for(driver, lambda d: isr(d) == set(BROKERS), ISR_TIMEOUT_S,
                     f"broker {follower} back in the ISR")
            assert broker_state(driver, follower) == "up"
            assert f"({follower} in)" in timeline(driver)
            assert replicas(driver)[follower][0] == 40  # caught up before it was let back in
            driver.save_screenshot(str(tmp_path / "live-follower-back.png"))
