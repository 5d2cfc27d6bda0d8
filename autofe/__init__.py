"""autofe: predict Spark / Databricks job runtimes before submission."""

from __future__ import annotations

__version__ = "0.1.0"
