"""Stable reason codes the gates reject with (fixtures and agents match on these)."""

from __future__ import annotations

from enum import StrEnum


class Completeness(StrEnum):
    """Why a feature's SQL cannot be computed well."""

    PARSE_ERROR = "parse_error"
    SANDBOX = "sandbox"
    UNKNOWN_TABLE = "unknown_table"
    UNKNOWN_COLUMN = "unknown_column"
    SHAPE = "shape"
    DUPLICATE_RUN_ID = "duplicate_run_id"
    VALUE_TYPE = "value_type"
    OVER_BUDGET = "over_budget"
    LOW_COVERAGE = "low_coverage"
    NONDETERMINISTIC = "nondeterministic"
    FAILED = "failed"


class Leakage(StrEnum):
    """How a feature would use information not available when the run is submitted."""

    LABEL = "label_leak"
    """The target run's own label (runs.duration_s) or a transform of it reaches the output."""
    SAME_RUN = "same_run_post_execution"
    """A post-execution value of the target run itself (its stages, end time, status...)."""
    FUTURE_ROWS = "future_rows"
    """Rows of runs submitted after the target, or facts recorded after its submission."""
    INCLUSIVE_CUTOFF = "inclusive_cutoff"
    """A ``<=`` / ``>=`` cutoff where only strictly earlier rows are known."""
    UNBOUNDED_HISTORY = "unbounded_history"
    """Post-execution values of other runs with no bound to runs that ended before submit."""
    WINDOW_FUTURE = "window_future"
    """A window that sees later rows: LEAD, FOLLOWING frames, whole-partition aggregates."""
    LATE_SNAPSHOT = "late_snapshot"
    """A table-stats snapshot not bounded to ``as_of <= submit_time`` of the target."""
    PERTURBATION = "perturbation"
    """Dynamic check: the value changed when facts known at or after submit were altered."""


class Cost(StrEnum):
    """Why a feature would cost too much on a larger history."""

    SUPERLINEAR = "grows_superlinearly"
    """Its work grows faster than ``n log n`` with the runs (a comparison with every earlier
    run of a cluster or node type)."""
    OVER_BUDGET = "over_feature_budget"
    """Its projected cost at the horizon exceeds ``feature_budget_s``."""
    SAMPLE_LIMIT = "sample_limit"
    """A sandbox limit stopped it on a sample of the warehouse."""
