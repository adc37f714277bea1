#!/usr/bin/env python3
"""Renders a `cleave report` page in headless Chromium and checks it (issue 19).

usage: browser_check.py CLEAVE SOURCE_DIR WORK_DIR [--png OUT.png] [--size W,H] [report args ...]

Writes the report, loads it with `chromium --headless --dump-dom` and checks the rendered DOM
(the four plots' SVG elements, one circle per plan the page lists), then takes a screenshot and
checks it is not blank (decoded here with zlib: no imaging library needed). Exits 77 (ctest
SKIP_RETURN_CODE) only when no chromium is installed.
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

SKIP = 77


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium_args(chrome, extra):
    return [chrome, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--hide-scrollbars", "--user-data-dir=" + os.environ["CLEAVE_CHROME_DIR"]] + extra


def png_pixels(path):
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB or RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, ctype = 8, b"", 0, 0, 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), "expected 8-bit RGB or RGBA"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
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
    return width, height, bpp, rows


def check(cond, what):
    if not cond:
        print("FAIL: " + what)
        sys.exit(1)
    print("ok: " + what)


def main():
    cleave, src, work = sys.argv[1:4]
    rest = sys.argv[4:]
    png_out, size = None, "1280,2200"
    if rest[:1] == ["--png"]:
        png_out, rest = rest[1], rest[2:]
    if rest[:1] == ["--size"]:
        size, rest = rest[1], rest[2:]
    chrome = find_chromium()
    if chrome is None:
        print("SKIP: no chromium on PATH (Debian: apt-get install chromium; .ci/deps installs it)")
        return SKIP
    os.makedirs(work, exist_ok=True)
    os.environ["CLEAVE_CHROME_DIR"] = os.path.join(work, "chrome-profile")
    html = os.path.join(work, "report.html")
    if not rest:
        rest = ["examples/llama-3-70b.toml", "dgx-h100", "--gpus", "64", "--gbs", "512"]
    subprocess.run([cleave, "report"] + rest + ["-o", html], cwd=src, check=True)
    page = open(html, encoding="utf-8").read()
    check("<script" not in page and "<link" not in page, "no scripts or linked resources")
    listed = len(re.findall(r'<circle class="pt[ "]', page))
    check(listed > 0, f"the page has {listed} plan points")

    url = "file://" + os.path.abspath(html)
    dom = subprocess.run(chromium_args(chrome, ["--dump-dom", url]), capture_output=True,
                         text=True, timeout=120).stdout
    check("<svg" in dom, "the browser rendered the page (DOM dumped)")
    for plot in ("scatter", "stage-memory", "time-breakdown", "timeline"):
        check(f'id="{plot}"' in dom, f"plot {plot} is in the DOM")
    rendered = len(re.findall(r'<circle class="pt[ "]', dom))
    check(rendered == listed, f"{rendered} plan circles rendered, {listed} in the page")
    plots = len(re.findall(r'<svg id="scatter"', dom))
    check(len(re.findall(r'<circle class="pt[^"]*chosen', dom)) == plots,
          f"one chosen plan marked per profile ({plots})")
    check(re.search(r'<polyline class="pareto" points="[0-9]', dom) is not None, "Pareto front drawn")
    check(len(re.findall(r'<rect class="seg"[^>]*data-stage', dom)) > 0, "memory bars drawn")
    check(len(re.findall(r'<rect class="ev"', dom)) > 0, "timeline events drawn")

    shot = png_out or os.path.join(work, "report.png")
    subprocess.run(chromium_args(chrome, ["--screenshot=" + os.path.abspath(shot),
                                          "--window-size=" + size, url]),
                   capture_output=True, timeout=120, check=True)
    w, h, bpp, rows = png_pixels(shot)
    check(w >= 1000 and h >= 1000, f"screenshot {w}x{h}")
    colours, ink = set(), 0
    for y in range(0, h, 4):
        row = rows[y]
        for x in range(0, w, 4):
            px = row[x * bpp:x * bpp + 3]
            colours.add(px)
            ink += 1 if px != b"\xff\xff\xff" else 0
    samples = ((h + 3) // 4) * ((w + 3) // 4)
    check(len(colours) > 20, f"screenshot has {len(colours)} colours (not blank)")
    check(ink > samples // 50, f"{100.0 * ink / samples:.1f} % of the screenshot is not white")
    return 0


if __name__ == "__main__":
    sys.exit(main())
