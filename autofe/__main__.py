"""``python -m autofe``: the same command line as the ``autofe`` script."""

from __future__ import annotations

from autofe.cli import app

if __name__ == "__main__":
    app()
