#!/usr/bin/env python3
"""Loads Ampel's status page in headless Chromium (Debian's chromium + chromium-driver,
driven by Selenium) and checks what a person would see.

Used by Tests/AmpelCLITests/PageBrowserTests.swift, which runs the daemon and the broker:
  1. the map has one path per expected district, each filled as expected (--expected: a JSON
     object AGS -> "#RRGGBB", computed by the test from the data);
  2. prints READY, then waits until the device --device appears in the device table, with no
     reload of the page in between (a marker set on the window must survive);
  3. saves screenshots (light, dark, narrow) into --shots;
  4. reports what the test asserts on: the language of the page at --default-url (the page
     without ?lang=, in a browser set to British English), the rows of the --also-device
     devices, the bridge card's text, and at 390 px wide each table's widths against its
     scroll container's and whether the phase and last-fix cells lie within it.
Each finding is one line on stdout; the exit status is 0 only when all checks pass.
"""
import argparse
import json
import sys

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait


def say(*parts):
    print(*parts, flush=True)


def scheme(driver, value):
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia",
                           {"features": [{"name": "prefers-color-scheme", "value": value}]})


def polls(driver):
    return int(driver.execute_script("return Number(document.body.dataset.polls || 0)"))


def next_poll(driver, timeout):
    """Waits until the page has finished one more poll of the API than now."""
    seen = polls(driver)
    WebDriverWait(driver, timeout).until(lambda d: polls(d) > seen)


def shoot(driver, path, width):
    driver.set_window_size(width, 900)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(int(height) + 20, 4000))
    next_poll(driver, 20)
    driver.save_screenshot(path)
    say("screenshot", path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--expected", required=True)
    parser.add_argument("--device", required=True)
    parser.add_argument("--also-device", action="append", default=[])
    parser.add_argument("--default-url")
    parser.add_argument("--shots", required=True)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()
    with open(args.expected) as f:
        expected = json.load(f)

    options = webdriver.ChromeOptions()
    options.binary_location = args.chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--hide-scrollbars", "--window-size=1400,1000", "--lang=en-GB"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(args.chromedriver), options=options)
    failures = 0
    try:
        scheme(driver, "light")
        if args.default_url:
            driver.get(args.default_url)
            WebDriverWait(driver, 30).until(lambda d: polls(d) >= 1)
            say("default page", json.dumps(driver.execute_script(
                "return {lang: document.documentElement.lang, devices: document.getElementById('h-devices').textContent,"
                " browser: navigator.language}"), ensure_ascii=False))
        driver.get(args.url)
        WebDriverWait(driver, 30).until(lambda d: polls(d) >= 1)

        fills = driver.execute_script(
            "return [...document.querySelectorAll('#map path.district')]"
            ".map(p => [p.getAttribute('data-ags'), p.getAttribute('fill')])")
        say("paths", len(fills))
        if len(fills) != len(expected):
            say("FAIL path count", len(fills), "expected", len(expected))
            failures += 1
        seen = dict(fills)
        for ags, colour in sorted(expected.items()):
            got = seen.get(ags)
            if got is None or got.upper() != colour.upper():
                say("FAIL fill", ags, got, "expected", colour)
                failures += 1

        driver.execute_script("window.__ampelNoReload = true")
        say("READY")
        for key in [args.device] + args.also_device:
            selector = 'tr[data-key="%s"]' % key.replace('"', '\\"')
            try:
                WebDriverWait(driver, 60, poll_frequency=0.2).until(
                    lambda d: d.execute_script("return document.querySelector('#device-table " + selector.replace("'", "\\'") + "') !== null"))
                row = driver.execute_script(
                    "return [...document.querySelector('#device-table " + selector.replace("'", "\\'") + "').cells].map(c => c.textContent)")
                say("device row", json.dumps(row, ensure_ascii=False))
            except Exception as error:  # a timeout: the device never showed
                say("FAIL device", key, "not in the table:", type(error).__name__)
                failures += 1
        say("bridge text", json.dumps(driver.execute_script(
            "return document.getElementById('h-bridge').closest('section').textContent"), ensure_ascii=False))
        if driver.execute_script("return window.__ampelNoReload === true") is not True:
            say("FAIL the page reloaded")
            failures += 1

        shoot(driver, args.shots + "/status-light.png", 1400)
        scheme(driver, "dark")
        shoot(driver, args.shots + "/status-dark.png", 1400)
        background = driver.execute_script("return getComputedStyle(document.body).backgroundColor")
        say("dark background", background)
        if background in ("rgb(243, 245, 247)", "rgb(255, 255, 255)"):
            say("FAIL dark mode did not change the background")
            failures += 1
        scheme(driver, "light")
        shoot(driver, args.shots + "/status-narrow.png", 390)
        # Each table against the box it would scroll in; a phase or last-fix cell counts as shown
        # when it is displayed, has a width, and lies within that box's left and right edges.
        say("narrow tables", json.dumps(driver.execute_script("""
            return [...document.querySelectorAll('table')].map(t => {
              const box = t.closest('.scroll') || t.parentElement, edge = box.getBoundingClientRect();
              const cells = [...t.querySelectorAll('tbody tr:not([hidden]) td.phase, tbody tr:not([hidden]) td.fix')];
              const shown = cells.filter(c => { const r = c.getBoundingClientRect();
                return getComputedStyle(c).display !== 'none' && r.width > 0 && r.left >= edge.left - 0.5 && r.right <= edge.right + 0.5; });
              return {id: t.id, scrollWidth: box.scrollWidth, clientWidth: box.clientWidth,
                      phase: t.querySelectorAll('tbody td.phase').length, fix: t.querySelectorAll('tbody td.fix').length,
                      cells: cells.length, shown: shown.length};
            })""")))
        overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        if overflow > 1:
            say("FAIL narrow screen scrolls sideways by", overflow, "px")
            failures += 1
    finally:
        driver.quit()
    say("failures", failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
