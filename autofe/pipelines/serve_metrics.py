"""What the prediction API counts, and its Prometheus text exposition (stdlib only).

A scrape needs a handful of counters and one histogram, which the text format (version 0.0.4)
makes easy to write by hand; ``prometheus_client`` would add a dependency and a process-global
registry that two apps in one test process would share. Prediction error is measured here too:
the server remembers what it predicted for each run id it was given (a bounded map, oldest
forgotten first) and scores the prediction when the run's actual duration is reported.
The scheduler's spend, budgets, queue and runtime events are read from its job store, the
retraining triggers' firings from ``HOME/triggers.jsonl``.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autofe.scheduler.jobs import TIERS
from autofe.scheduler.store import Summary

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
"""Seconds: the fast path lives in the first buckets, computed features (~0.35 s) in the last."""
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LEDGER_SIZE = 10_000


@dataclass(frozen=True)
class Remembered:
    """What the server predicted for one run."""

    job_id: str
    p50_s: float
    intervals: Mapping[str, Sequence[float]]
    """By level label, as the API reports them: ``{"80%": (low, high), ...}``."""
    version: str


@dataclass(frozen=True)
class Scored:
    """A prediction meeting its actual: the absolute percentage error and interval hits."""

    prediction: Remembered
    actual_s: float

    @property
    def abs_pct_error(self) -> float:
        """|p50 - actual| / actual.

        >>> Scored(Remembered("j", 12.0, {}, "v1"), 10.0).abs_pct_error
        0.2
        """
        return abs(self.prediction.p50_s - self.actual_s) / self.actual_s

    def covered(self, level: str) -> bool:
        low, high = self.prediction.intervals[level]
        return low <= self.actual_s <= high


class PredictionLedger:
    """Run id → the prediction made for it, at most ``size`` entries (thread-safe)."""

    def __init__(self, size: int = LEDGER_SIZE) -> None:
        self._size = size
        self._entries: OrderedDict[str, Remembered] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, run_id: str, prediction: Remembered) -> None:
        with self._lock:
            self._entries[run_id] = prediction
            self._entries.move_to_end(run_id)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)

    def take(self, run_id: str) -> Remembered | None:
        """The prediction for ``run_id``, forgotten so a repeated report is not scored twice."""
        with self._lock:
            return self._entries.pop(run_id, None)

    def __len__(self) -> int:
        return len(self._entries)


@dataclass
class _Histogram:
    buckets: list[int] = field(default_factory=lambda: [0] * len(LATENCY_BUCKETS))
    total: float = 0.0
    count: int = 0

    def observe(self, seconds: float) -> None:
        for i, bound in enumerate(LATENCY_BUCKETS):
            if seconds <= bound:
                self.buckets[i] += 1
        self.total += seconds
        self.count += 1


class ApiMetrics:
    """Counters and histograms of one app instance; ``render`` writes the exposition."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[tuple[str, str, int]] = Counter()
        self.latency: dict[str, _Histogram] = {}
        self.predictions: Counter[str] = Counter()
        self.actuals = 0
        self.matched = 0
        self.ape_sum = 0.0
        self.covered: Counter[str] = Counter()
        self.reloads: Counter[str] = Counter()

    def observe_request(self, endpoint: str, method: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(endpoint, method, status)] += 1
            self.latency.setdefault(endpoint, _Histogram()).observe(seconds)

    def observe_predictions(self, source: str, n: int = 1) -> None:
        with self._lock:
            self.predictions[source] += n

    def observe_actual(self, scored: Scored | None) -> None:
        with self._lock:
            self.actuals += 1
            if scored is None:
                return
            self.matched += 1
            self.ape_sum += scored.abs_pct_error
            for level in scored.prediction.intervals:
                self.covered[level] += scored.covered(level)

    def observe_reload(self, outcome: str) -> None:
        with self._lock:
            self.reloads[outcome] += 1

    def render(self, version: str | None) -> str:
        """The text exposition; ``version`` is the model being served (None before one)."""
        with self._lock:
            parts = [
                *self._request_lines(),
                *self._latency_lines(),
                *_family(
                    "autofe_model_info",
                    "gauge",
                    "The model version being served (value 1).",
                    [({"version": version}, 1)] if version else [],
                ),
                *_family(
                    "autofe_model_reloads_total",
                    "counter",
                    "Hot reloads of the active model by outcome.",
                    [({"outcome": k}, v) for k, v in sorted(self.reloads.items())],
                ),
                *_family(
                    "autofe_predictions_total",
                    "counter",
                    "Predictions made, by where the features came from (given or computed).",
                    [({"source": k}, v) for k, v in sorted(self.predictions.items())],
                ),
                *self._error_lines(),
            ]
        return "\n".join(parts) + "\n"

    def _request_lines(self) -> list[str]:
        samples = [
            ({"endpoint": e, "method": m, "status": str(s)}, n)
            for (e, m, s), n in sorted(self.requests.items())
        ]
        return _family(
            "autofe_http_requests_total",
            "counter",
            "HTTP requests by endpoint, method and status.",
            samples,
        )

    def _latency_lines(self) -> list[str]:
        name = "autofe_http_request_duration_seconds"
        lines = [
            f"# HELP {name} Time from the request's arrival to its response, by endpoint.",
            f"# TYPE {name} histogram",
        ]
        for endpoint, h in sorted(self.latency.items()):
            label = {"endpoint": endpoint}
            for bound, n in zip(LATENCY_BUCKETS, h.buckets, strict=True):
                lines.append(_sample(f"{name}_bucket", {**label, "le": repr(bound)}, n))
            lines.append(_sample(f"{name}_bucket", {**label, "le": "+Inf"}, h.count))
            lines.append(_sample(f"{name}_sum", label, h.total))
            lines.append(_sample(f"{name}_count", label, h.count))
        return lines

    def _error_lines(self) -> list[str]:
        name = "autofe_prediction_abs_pct_error"
        return [
            *_family(
                "autofe_actuals_total",
                "counter",
                "Actual durations reported, by whether this server had predicted the run.",
                [
                    ({"matched": "true"}, self.matched),
                    ({"matched": "false"}, self.actuals - self.matched),
                ],
            ),
            f"# HELP {name} Absolute percentage error of p50 predictions whose actual arrived.",
            f"# TYPE {name} summary",
            _sample(f"{name}_sum", {}, self.ape_sum),
            _sample(f"{name}_count", {}, self.matched),
            *_family(
                "autofe_prediction_interval_hits_total",
                "counter",
                "Matched actuals inside the predicted interval, by level.",
                [({"level": level}, n) for level, n in sorted(self.covered.items())],
            ),
        ]


RUNTIME_EVENTS = (
    ("preemptions", "Spot preemptions reported, by account and tier."),
    ("fallbacks", "Moves from spot to on-demand after preemptions, by account and tier."),
    ("upgrades", "Deadline-aware upgrades (on-demand or more workers), by account and tier."),
)
"""The scheduler's runtime-event counters: store attribute, and what the family counts."""


def scheduler_lines(summary: Summary | None) -> list[str]:
    """The scheduler's families, read from its job store (``None``: nothing submitted yet).

    Spend and the runtime-event counters come from the store, so they survive a restart and
    agree across API processes sharing a home folder; queue depth is given for every tier.

    >>> lines = scheduler_lines(None)
    >>> [line for line in lines if not line.startswith("#")][:2]
    ['autofe_scheduler_queue_depth{tier="P0"} 0', 'autofe_scheduler_queue_depth{tier="P1"} 0']
    """
    spend = summary.spend if summary else ()
    by_state = summary.jobs_by_state if summary else {}
    remaining = summary.budget_remaining if summary else {}

    def per_group(attribute: str) -> list[tuple[dict[str, str], float]]:
        return [({"account": s.account, "tier": s.tier}, getattr(s, attribute)) for s in spend]

    return [
        *_family(
            "autofe_scheduler_spend_usd_total",
            "counter",
            "USD spent by submitted jobs (the running ones up to now), by account and tier.",
            per_group("usd"),
        ),
        *_family(
            "autofe_scheduler_budget_remaining_usd",
            "gauge",
            "USD left in the current period of each budget (negative: overrun).",
            [({"budget": name}, usd) for name, usd in sorted(remaining.items())],
        ),
        *_family(
            "autofe_scheduler_queue_depth",
            "gauge",
            "Submitted jobs waiting to start, by tier.",
            [({"tier": t}, by_state.get((t, "queued"), 0)) for t in TIERS],
        ),
        *_family(
            "autofe_scheduler_jobs",
            "gauge",
            "Submitted jobs by tier and state.",
            [({"tier": t, "state": s}, n) for (t, s), n in sorted(by_state.items())],
        ),
        *(
            line
            for attribute, help_text in RUNTIME_EVENTS
            for line in _family(
                f"autofe_scheduler_{attribute}_total", "counter", help_text, per_group(attribute)
            )
        ),
    ]


def trigger_lines(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The retraining triggers' families, from the records of ``HOME/triggers.jsonl``.

    Counted from the file at each scrape, so they survive a restart and agree across servers
    sharing a home. A record without a text ``kind``, ``tier`` or ``action`` is not counted.

    >>> lines = trigger_lines([
    ...     {"at_s": 10.0, "kind": "skew", "tier": "P1", "action": "held"},
    ...     {"at_s": 20.0, "kind": "skew", "tier": "P1", "action": "submitted"},
    ... ])
    >>> [line for line in lines if not line.startswith("#")]  # doctest: +NORMALIZE_WHITESPACE
    ['autofe_trigger_firings_total{kind="skew",tier="P1",action="held"} 1',
     'autofe_trigger_firings_total{kind="skew",tier="P1",action="submitted"} 1',
     'autofe_trigger_last_fired_timestamp_seconds{kind="skew"} 20.0',
     'autofe_retraining_held_total 1']
    """
    firings: Counter[tuple[str, str, str]] = Counter()
    last: dict[str, float] = {}
    for record in records:
        kind, tier, action = (record.get(key) for key in ("kind", "tier", "action"))
        if not (isinstance(kind, str) and isinstance(tier, str) and isinstance(action, str)):
            continue
        firings[(kind, tier, action)] += 1
        at_s = record.get("at_s")
        if isinstance(at_s, int | float) and not isinstance(at_s, bool) and math.isfinite(at_s):
            last[kind] = max(float(at_s), last.get(kind, -math.inf))
    return [
        *_family(
            "autofe_trigger_firings_total",
            "counter",
            "Retraining triggers fired, by kind, tier and what was done (HOME/triggers.jsonl).",
            [({"kind": k, "tier": t, "action": a}, n) for (k, t, a), n in sorted(firings.items())],
        ),
        *_family(
            "autofe_trigger_last_fired_timestamp_seconds",
            "gauge",
            "Unix time of each trigger kind's latest firing.",
            [({"kind": k}, at_s) for k, at_s in sorted(last.items())],
        ),
        *_family(
            "autofe_retraining_held_total",
            "counter",
            "Retraining requests held (by the budget) instead of submitted.",
            [({}, sum(n for (_, _, a), n in firings.items() if a == "held"))],
        ),
    ]


def _family(
    name: str, kind: str, help_text: str, samples: Iterable[tuple[dict[str, str], float]]
) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    return lines + [_sample(name, labels, value) for labels, value in samples]


def _sample(name: str, labels: Mapping[str, str], value: float) -> str:
    """One sample line, label values escaped as the text format requires.

    >>> _sample("x_total", {"path": 'a"b'}, 2)
    'x_total{path="a\\\\"b"} 2'
    """
    if not labels:
        return f"{name} {_number(value)}"
    inner = ",".join(f'{k}="{_escaped(v)}"' for k, v in labels.items())
    return f"{name}{{{inner}}} {_number(value)}"


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    """Go's float syntax, which Prometheus parses.

    >>> _number(3), _number(0.25), _number(float("inf"))
    ('3', '0.25', '+Inf')
    """
    if isinstance(value, int):
        return str(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return "NaN" if math.isnan(value) else repr(value)
