"""The browser the dashboard tests drive: one headless Chromium per test module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.browserkit import ARGS, CHROMIUM, playwright_sync_api


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_sync_api().sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
