"""The HTML report renders offline in a real browser: headless Chromium takes a screenshot
and dumps the rendered DOM.

Needs Debian's ``chromium`` package (``apt-get install -y chromium``); skipped without it.
Set ``MONGOSTORE_UPDATE_SCREENSHOT=1`` to copy the screenshot to ``docs/report-screenshot.png``.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mongostore.drivers.mongomock_compat import in_memory_collection
from mongostore.tools.analytics import scoped_pipeline
from mongostore.tools.report import CREATED, STALE, build_report

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2024, 6, 15, 12, 0, tzinfo=timezone.utc)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM),
        reason=f"headless Chromium not found at {CHROMIUM}: install it with `apt-get install -y chromium` (Debian)",
    ),
]


class CollAgg:
    def __init__(self, coll: Any) -> None:
        self.coll = coll

    def aggregate(self, prefix: tuple[str, ...], pipeline: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return list(self.coll.aggregate(scoped_pipeline(prefix, pipeline)))


def seeded_collection() -> Any:
    """About 600 memories of 8 users over 16 weeks, denser towards NOW, in the stored shape."""
    rng = random.Random(7)
    users = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "<heidi & co>"]
    weights = [30, 22, 15, 11, 8, 6, 5, 3]
    kinds = ["fact", "preference", "episode", "instruction", None]
    docs = []
    for i in range(600):
        user = rng.choices(users, weights)[0]
        ns = ["users", user, rng.choice(["memories", "memories", "prefs", "episodes"])]
        path = "".join(label + "." for label in ns)
        created = NOW - timedelta(days=112 * rng.random() ** 1.6, minutes=rng.randrange(1440))
        updated = created + (NOW - created) * rng.random() if rng.random() < 0.35 else created
        value: dict[str, Any] = {"text": f"memory {i}"}
        kind = rng.choices(kinds, [40, 25, 20, 10, 5])[0]
        if kind:
            value["kind"] = kind
        doc: dict[str, Any] = {
            "_id": f"{path}\x00m{i}", "namespace": ns, "path": path, "depth": 3, "key": f"m{i}",
            "value": value, "created_at": created, "updated_at": updated,
        }
        if rng.random() < 0.3:
            doc["expires_at"] = NOW + timedelta(hours=rng.choice([-1, 0.5, 5, 30, 100, 400]))
            doc["ttl_minutes"] = 60.0
        docs.append(doc)
    coll = in_memory_collection(collection_name="report")
    coll.insert_many(docs)
    return coll


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--hide-scrollbars", "--force-device-scale-factor=1", f"--user-data-dir={profile}", *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)


def decode_png(data: bytes) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """8-bit RGB/RGBA, non-interlaced PNG -> (height, width, channels) array."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, []
    width = height = depth = color = interlace = 0
    while pos < len(data):
        length, ctype = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if ctype == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif ctype == b"IDAT":
            idat.append(body)
        elif ctype == b"IEND":
            break
    assert depth == 8 and interlace == 0 and color in (2, 6), (depth, color, interlace)
    bpp = 3 if color == 2 else 4
    stride = width * bpp
    raw = zlib.decompress(b"".join(idat))
    out = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        start = y * (stride + 1)
        kind = raw[start]
        line = np.frombuffer(raw, dtype=np.uint8, count=stride, offset=start + 1).astype(np.int32)
        if kind == 1:  # Sub: running sum per channel
            line = line.reshape(-1, bpp).cumsum(axis=0).reshape(-1) & 255
        elif kind == 2:  # Up
            line = (line + prev) & 255
        elif kind in (3, 4):  # Average, Paeth: sequential along the row
            cur, up = line.tolist(), prev.tolist()
            for i in range(stride):
                left = cur[i - bpp] if i >= bpp else 0
                if kind == 3:
                    cur[i] = (cur[i] + (left + up[i]) // 2) & 255
                else:
                    upleft = up[i - bpp] if i >= bpp else 0
                    p = left + up[i] - upleft
                    pa, pb, pc = abs(p - left), abs(p - up[i]), abs(p - upleft)
                    pred = left if pa <= pb and pa <= pc else (up[i] if pb <= pc else upleft)
                    cur[i] = (cur[i] + pred) & 255
            line = np.array(cur, dtype=np.int32)
        out[y] = line
        prev = line
    return out.reshape(height, width, bpp)


def has_colour(pixels: np.ndarray[Any, np.dtype[np.uint8]], hex_colour: str, tolerance: int = 4) -> bool:
    rgb = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.int32)
    diff = np.abs(pixels[:, :, :3].astype(np.int32) - rgb).max(axis=2)
    return bool((diff <= tolerance).sum() > 50)


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    page = build_report(CollAgg(seeded_collection()), ("users",), now=NOW, title="Memories under users/")
    html_file = tmp_path / "report.html"
    html_file.write_text(page, encoding="utf-8")
    url = html_file.as_uri()

    png = tmp_path / "report.png"
    shot = chromium(tmp_path, f"--screenshot={png}", "--window-size=1200,1600", url)
    assert shot.returncode == 0, shot.stderr[-2000:]
    assert png.exists(), shot.stderr[-2000:]
    data = png.read_bytes()
    assert len(data) > 10_000, f"screenshot is only {len(data)} bytes"

    pixels = decode_png(data)
    assert pixels.shape[:2] == (1600, 1200)
    distinct = np.unique(pixels[::4, ::4, :3].reshape(-1, 3), axis=0)
    assert len(distinct) > 20, "the screenshot is (nearly) a single colour"
    assert has_colour(pixels, CREATED), "no 'created' bars of the growth chart in the screenshot"
    assert has_colour(pixels, STALE), "no stale arc of the donut in the screenshot"

    dom = chromium(tmp_path, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = dom.stdout
    for chart in ("growth", "namespaces", "stale", "ttl", "breakdown"):
        assert f'<svg class="chart {chart}"' in rendered, chart
    assert rendered.count('class="bar created"') >= 10
    assert '<polyline class="total"' in rendered
    assert '<circle class="stale-arc"' in rendered
    assert "&lt;heidi &amp; co&gt;" in rendered and "<heidi" not in rendered

    if os.environ.get("MONGOSTORE_UPDATE_SCREENSHOT"):
        (ROOT / "docs").mkdir(exist_ok=True)
        shutil.copyfile(png, ROOT / "docs" / "report-screenshot.png")
