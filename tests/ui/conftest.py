"""The browser tests need Playwright (the ``ui`` extra, ``make test-ui``); without it they are
not collected, so that ``make test`` works with the ``dev`` extra alone."""

from __future__ import annotations

import importlib.util

collect_ignore = [] if importlib.util.find_spec("playwright") else ["test_dashboard.py"]
