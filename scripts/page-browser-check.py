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
     scroll container's and whether the phase and last-fix cells lie within it;
  5. runs axe-core (PyPI's axe-selenium-python, the engine accessibility audits use) in light and
     dark mode at 1280 and 390 px: any `serious` or `critical` violation fails, the others are
     listed.
Each finding is one line on stdout; the exit status is 0 only when all checks pass.

With --data-check (the data badge, issue 30.3) it starts the browser first and prints BROWSER,
then waits for its standard input to end (the test closes it once the daemon it starts serves
the page) and reads the page's base URL from --url-file, so the time until the page shows the
data counts from the daemon's start, not the browser's. It loads --path and waits (up to --wait
seconds) until the header and the lines under it hold every --expect text, and prints
"data seen <epoch seconds or null>"; then, over that render and the next two polls, whether the
page's text ever held a --never word; then what the header, the lines under it and the bridge
card say, and the same for --other-path (the other language). It reads only what the page's
first version had as well (header.top, the visible .banner elements, the bridge card), so the
test's assertions can be run against an older page.
"""
import argparse
import json
import re
import sys
import time

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


# The header (its badges and links alone in meta: the tagline says "live from the daemon"), the
# visible lines under it, and the bridge card, as a person reads them.
DATA_TEXTS = """
    const header = document.querySelector('header.top');
    const notices = [...document.querySelectorAll('.banner')].filter(b => !b.hidden).map(b => b.innerText.trim());
    const bridge = document.getElementById('h-bridge');
    const badge = document.getElementById('data-badge');
    const meta = header && header.querySelector('.meta');
    return {header: header ? header.innerText.replace(/\\s+/g, ' ').trim() : null, notices: notices,
            meta: meta ? meta.innerText.replace(/\\s+/g, ' ').trim() : null,
            bridge: bridge ? bridge.closest('section').innerText.replace(/\\s+/g, ' ').trim() : null,
            badgeClass: badge ? badge.className : null, polls: Number(document.body.dataset.polls || 0)};
"""


def accessibility(driver):
    """axe-core on the page as it is now, in light and dark mode at 1280 and 390 px: the
    number of serious or critical violations (each printed with the elements it names)."""
    from axe_selenium_python import Axe
    axe = Axe(driver)
    failures = 0
    for mode in ("light", "dark"):
        for width in (1280, 390):
            scheme(driver, mode)
            driver.set_window_size(width, 900)
            axe.inject()
            results = axe.run()
            found = results["violations"]
            say("axe", mode, width, json.dumps({v["id"]: v["impact"] for v in found}))
            for violation in found:
                if violation["impact"] in ("serious", "critical"):
                    targets = [node["target"] for node in violation["nodes"][:5]]
                    say("FAIL axe", mode, width, violation["id"], violation["impact"], violation["help"], json.dumps(targets))
                    failures += 1
    scheme(driver, "light")
    return failures


def data_texts(driver):
    return driver.execute_script(DATA_TEXTS)


def loaded(driver, url):
    """Loads url and waits for the script's first finished poll."""
    driver.get(url)
    WebDriverWait(driver, 30).until(lambda d: polls(d) >= 1)


def data_check(driver, args):
    failures = 0
    say("BROWSER")
    sys.stdin.read()  # the test closes it once the page is served
    with open(args.url_file) as f:
        base = f.read().strip()
    driver.get(base + args.path)
    seen = None

    def shows_all(d):
        texts = data_texts(d)
        text = (texts["header"] or "") + "\n" + "\n".join(texts["notices"])
        return all(e in text for e in args.expect)
    try:
        WebDriverWait(driver, args.wait, poll_frequency=0.1).until(shows_all)
        seen = time.time()
    except Exception as error:  # a timeout: what it shows instead is reported below
        say("FAIL the page never showed", json.dumps(args.expect, ensure_ascii=False), type(error).__name__)
        failures += 1
    say("data seen", json.dumps(seen))
    # The words it must never show, at this render and after each of the next two polls.
    found = {word: False for word in args.never}
    for round in range(3):
        if round:
            next_poll(driver, 20)
        body = driver.execute_script("return document.body.innerText")
        for word in args.never:
            if re.search(r"\b" + re.escape(word) + r"\b", body, re.IGNORECASE):
                found[word] = True
    say("data never", json.dumps(found, ensure_ascii=False))
    say("data texts", json.dumps(data_texts(driver), ensure_ascii=False))
    if args.other_path:
        loaded(driver, base + args.other_path)
        next_poll(driver, 20)
        say("data other", json.dumps(data_texts(driver), ensure_ascii=False))
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url")
    parser.add_argument("--expected")
    parser.add_argument("--device")
    parser.add_argument("--data-check", action="store_true")
    parser.add_argument("--url-file")
    parser.add_argument("--path", default="/")
    parser.add_argument("--other-path")
    parser.add_argument("--expect", action="append", default=[])
    parser.add_argument("--never", action="append", default=[])
    parser.add_argument("--wait", type=float, default=30)
    parser.add_argument("--also-device", action="append", default=[])
    parser.add_argument("--default-url")
    parser.add_argument("--shots")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()
    if args.data_check:
        if not args.url_file:
            parser.error("--data-check needs --url-file")
    elif not (args.url and args.expected and args.device and args.shots):
        parser.error("--url, --expected, --device and --shots are required")
    expected = {}
    if not args.data_check:
        with open(args.expected) as f:
            expected = json.load(f)

    options = webdriver.ChromeOptions()
    options.binary_location = args.chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--hide-scrollbars", "--window-size=1400,1000", "--lang=en-GB"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(args.chromedriver), options=options)
    failures = 0
    if args.data_check:
        try:
            failures = data_check(driver, args)
        finally:
            driver.quit()
        say("failures", failures)
        return 1 if failures else 0
    try:
        scheme(driver, "light")
        if args.default_url:
            loaded(driver, args.default_url)
            say("default page", json.dumps(driver.execute_script(
                "return {lang: document.documentElement.lang, devices: document.getElementById('h-devices').textContent,"
                " browser: navigator.language}"), ensure_ascii=False))
        loaded(driver, args.url)

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
        failures += accessibility(driver)
    finally:
        driver.quit()
    say("failures", failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
