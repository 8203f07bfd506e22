"""The web view in a real browser: Debian's Chromium, driven headlessly by Selenium.

Run by crates/fieldstore-cli/tests/web_view.rs (which starts the server and writes the store)
and by bench/http.sh (--bench: only the time from choosing a field to its map drawn).
Checks: sign in with the token; browse by facets that narrow; plot a field (the screenshot
of the map has coloured pixels, not a blank canvas); hover; click for the value and the time
series, equal to ecCodes' (grib_get -l); the keyboard; the download; the grid types
(regular, Gaussian, reduced, rotated); a live update after another process writes.
Prints one JSON line of measurements; exits non-zero on any failure.
"""

import argparse
import json
import os
import struct
import subprocess
import sys
import time
import urllib.request
import zlib

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait


def browser():
    o = webdriver.ChromeOptions()
    o.binary_location = os.environ.get("FIELDSTORE_CHROMIUM", "/usr/bin/chromium")
    for a in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
              "--window-size=1500,1300", "--force-device-scale-factor=1"]:
        o.add_argument(a)
    driver = os.environ.get("FIELDSTORE_CHROMEDRIVER", "/usr/bin/chromedriver")
    return webdriver.Chrome(service=Service(driver), options=o)


def png_pixels(data):
    """(width, height, rows of RGBA bytes) of an 8-bit RGB or RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), f"PNG depth {depth} colour {colour}"
            bpp = 4 if colour == 6 else 3
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def coloured_share(png):
    """The share of pixels that are clearly coloured (not white, grey or black)."""
    w, h, bpp, rows = png_pixels(png)
    n = 0
    for row in rows:
        for x in range(0, w * bpp, bpp):
            r, g, b = row[x], row[x + 1], row[x + 2]
            if max(r, g, b) - min(r, g, b) > 40:
                n += 1
    return n / (w * h)


def wait(d, what, cond, timeout=20):
    try:
        return WebDriverWait(d, timeout, poll_frequency=0.05).until(lambda d: cond(d))
    except Exception as e:  # noqa: BLE001: say what was waited for
        status = d.find_element(By.ID, "status").text
        raise AssertionError(f"timed out waiting for {what} (status: {status!r})") from e


def field_button(d, *parts):
    try:
        for b in d.find_elements(By.CSS_SELECTOR, "#fields button"):
            r = b.get_attribute("data-request")
            if all(p in r.split(",") for p in parts):
                return b
    except StaleElementReferenceException:
        pass
    return None


def plot(d, *parts):
    b = wait(d, f"a listed field with {parts}", lambda d: field_button(d, *parts))
    request = b.get_attribute("data-request")
    b.click()
    wait(d, f"the map of {request}",
         lambda d: d.find_element(By.ID, "map").get_attribute("data-drawn") == request)
    return request, float(d.find_element(By.ID, "draw-ms").get_attribute("data-ms"))


def narrowed(d, keyword, value):
    try:
        buttons = d.find_elements(By.CSS_SELECTOR, "#fields button")
        return buttons and all(f"{keyword}={value}" in b.get_attribute("data-request").split(",")
                               for b in buttons)
    except StaleElementReferenceException:
        return False


def choose(d, keyword, value):
    for _ in range(10):
        try:
            Select(wait(d, f"the {keyword} facet", lambda d: d.find_element(By.ID, f"facet-{keyword}"))) \
                .select_by_value(value)
            break
        except StaleElementReferenceException:
            time.sleep(0.1)
    wait(d, f"the fields narrowed by {keyword}={value}", lambda d: narrowed(d, keyword, value))


def clear(d):
    d.find_element(By.ID, "clear").click()
    wait(d, "everything listed again", lambda d: "(everything)" in d.find_element(By.ID, "status").text)


def click_at(d, lat, lon):
    """Clicks the map where (lat, lon) is drawn."""
    cv = d.find_element(By.ID, "map")
    r = d.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.width, r.height];", cv)
    x = (lon + 180) / 360 * r[0] - r[0] / 2
    y = (90 - lat) / 180 * r[1] - r[1] / 2
    ActionChains(d).move_to_element_with_offset(cv, int(round(x)), int(round(y))).click().perform()


def eccodes_value(grib, lat, lon, where):
    out = subprocess.run(["grib_get", "-F", "%.12g", "-w", where, "-l", f"{lat},{lon},1", grib],
                         check=True, capture_output=True, text=True).stdout.split()
    assert len(out) == 1, f"grib_get -l gave {out}"
    return float(out[0])


def close(a, b):
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


def sign_in(d, url, token):
    d.get(url)
    if token:
        wait(d, "the sign-in form", lambda d: d.find_element(By.ID, "login").is_displayed())
        d.find_element(By.ID, "token").send_keys(token + Keys.ENTER)
    wait(d, "the facets", lambda d: len(d.find_elements(By.CSS_SELECTOR, "#facets select")) >= 5)


def run_checks(a, d, results):
    shots = a.out
    sign_in(d, a.url, a.token)
    facets = [s.get_attribute("data-keyword") for s in d.find_elements(By.CSS_SELECTOR, "#facets select")]
    assert {"class", "expver", "param", "step", "levelist"} <= set(facets), facets

    # Browse: each choice narrows the other facets.
    choose(d, "expver", "0001")
    choose(d, "param", "130")
    choose(d, "levelist", "500")
    opts = [o.get_attribute("value") for o in
            d.find_elements(By.CSS_SELECTOR, "#facet-levelist option") if o.get_attribute("value")]
    assert opts == ["500"], f"levelist facet not narrowed: {opts}"
    steps = [o.get_attribute("value") for o in
             d.find_elements(By.CSS_SELECTOR, "#facet-step option") if o.get_attribute("value")]
    assert sorted(steps) == ["0", "12", "6"], steps

    # Plot: a drawn map, not a blank canvas.
    request, ms = plot(d, "step=6")
    results["draw_ms_small"] = ms
    png = d.find_element(By.ID, "map").screenshot_as_png
    open(os.path.join(shots, "map-regular_ll.png"), "wb").write(png)
    share = coloured_share(png)
    results["coloured_share_regular_ll"] = round(share, 3)
    assert share > 0.5, f"the map is mostly blank: {share:.1%} coloured"
    legend = d.find_element(By.ID, "legend-labels").text
    assert "K" in legend, f"no units on the colour scale: {legend!r}"
    assert "Temperature" in d.find_element(By.ID, "field-title").text

    # Hover: a value with units.
    cv = d.find_element(By.ID, "map")
    ActionChains(d).move_to_element_with_offset(cv, 40, -30).perform()
    wait(d, "a hover value", lambda d: " K " in d.find_element(By.ID, "hover").text + " ")

    # Click: the value at the nearest grid point and its series, ecCodes' values.
    click_at(d, 10.3, 20.7)
    pv = wait(d, "the value at the clicked point",
              lambda d: d.find_element(By.ID, "point-value").get_attribute("data-value") and
              d.find_element(By.ID, "point-value"))
    lat, lon = float(pv.get_attribute("data-lat")), float(pv.get_attribute("data-lon"))
    value = float(pv.get_attribute("data-value"))
    assert abs(lat - 10.3) < 5 and abs(lon - 20.7) < 5, (lat, lon)
    want = eccodes_value(a.grib, lat, lon, "step=6,paramId=130,level=500")
    assert close(value, want), f"page shows {value}, ecCodes {want} at {lat},{lon}"
    rows = d.find_elements(By.CSS_SELECTOR, "#series tbody tr")
    assert [r.find_elements(By.TAG_NAME, "td")[0].text for r in rows] == ["0", "6", "12"]
    for r in rows:
        step = r.find_elements(By.TAG_NAME, "td")[0].text
        got = float(r.get_attribute("data-value"))
        want = eccodes_value(a.grib, lat, lon, f"step={step},paramId=130,level=500")
        assert close(got, want), f"series step {step}: page {got}, ecCodes {want}"
    results["values_checked_against_eccodes"] = len(rows) + 1
    open(os.path.join(shots, "series.png"), "wb").write(d.find_element(By.ID, "point").screenshot_as_png)
    d.save_screenshot(os.path.join(shots, "page.png"))

    # The keyboard: focus the map, move the cursor, Enter.
    cv.send_keys(Keys.ARROW_UP, Keys.ARROW_UP, Keys.SHIFT + Keys.ARROW_RIGHT, Keys.ENTER)
    wait(d, "the value at the keyboard's cursor",
         lambda d: d.find_element(By.ID, "point-value").get_attribute("data-lat") not in ("", str(lat)))

    # Download: the field's GRIB bytes, as the CLI reads them.
    href = d.find_element(By.ID, "download").get_attribute("href")
    req = urllib.request.Request(href, headers={"Authorization": f"Bearer {a.token}"} if a.token else {})
    body = urllib.request.urlopen(req, timeout=30).read()
    out = os.path.join(shots, "download.grib")
    subprocess.run([a.fieldstore, "--config", a.config, "read", request, out], check=True)
    assert body == open(out, "rb").read(), "the download differs from `fieldstore read`"

    # Grid types: each drawn (colours on the map).
    clear(d)
    choose(d, "expver", "0002")
    for param, grid, least in (("130", "reduced_gg", 0.5), ("131", "regular_gg", 0.5),
                               ("132", "rotated_ll", 0.02)):
        plot(d, f"param={param}")
        info = d.find_element(By.ID, "field-info").text
        assert grid in info, f"{grid} not in {info!r}"
        png = d.find_element(By.ID, "map").screenshot_as_png
        open(os.path.join(shots, f"map-{grid}.png"), "wb").write(png)
        share = coloured_share(png)
        results[f"coloured_share_{grid}"] = round(share, 3)
        assert share > least, f"{grid}: {share:.1%} coloured"

    # Live: another process writes and flushes; the field appears without a reload.
    clear(d)
    choose(d, "expver", "0001")
    choose(d, "param", "130")
    choose(d, "levelist", "500")
    wait(d, "the event stream", lambda d: "on" in d.find_element(By.ID, "live").get_attribute("class"))
    t0 = time.time()
    subprocess.run(json.loads(a.write_cmd), check=True, capture_output=True)
    wait(d, "the live field", lambda d: d.find_elements(By.CSS_SELECTOR, "#fields li.new button"), 30)
    b = d.find_element(By.CSS_SELECTOR, "#fields li.new button")
    assert "step=18" in b.get_attribute("data-request").split(","), b.get_attribute("data-request")
    assert "arrived live" in d.find_element(By.ID, "status").text
    results["live_seconds"] = round(time.time() - t0, 2)
    plot(d, "step=18")


def run_bench(a, d, results):
    sign_in(d, a.url, a.token)
    times = []
    for _ in range(a.repeat):
        # From choosing (the click) to the map drawn, as the page measures it (performance.now).
        d.execute_script("window.fieldstore.current = null")
        d.get(a.url)
        sign_in(d, a.url, None)
        for kv in a.choose.split(","):
            k, v = kv.split("=")
            choose(d, k, v)
        _, ms = plot(d, *a.pick.split(","))
        times.append(ms)
    png = d.find_element(By.ID, "map").screenshot_as_png
    open(os.path.join(a.out, "map-0.1deg.png"), "wb").write(png)
    results["coloured_share_big"] = round(coloured_share(png), 3)
    results["choose_to_drawn_ms"] = times
    results["choose_to_drawn_ms_median"] = sorted(times)[len(times) // 2]
    results["points_total"] = d.execute_script("return window.fieldstore.data.meta.total")
    results["points_drawn"] = d.execute_script("return window.fieldstore.data.meta.n")
    results["server_decode_ms"] = d.execute_script("return window.fieldstore.data.meta.decode_ms")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--token", default="")
    p.add_argument("--out", required=True)
    p.add_argument("--grib")
    p.add_argument("--fieldstore")
    p.add_argument("--config")
    p.add_argument("--write-cmd")
    p.add_argument("--bench", action="store_true")
    p.add_argument("--choose", default="")
    p.add_argument("--pick", default="")
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    results = {}
    d = browser()
    try:
        results["chromium"] = d.capabilities.get("browserVersion")
        (run_bench if a.bench else run_checks)(a, d, results)
    except Exception:
        try:
            d.save_screenshot(os.path.join(a.out, "failure.png"))
            print("page status:", d.find_element(By.ID, "status").text, file=sys.stderr)
            for entry in d.get_log("browser"):
                print("console:", entry, file=sys.stderr)
        except Exception:  # noqa: BLE001
            pass
        raise
    finally:
        d.quit()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
