"""Cost impact: pick each job's cheapest configuration that the model says meets a deadline.

Ground truth comes from configuration sweeps: the same work (job, parameters, data) run under
every candidate configuration, so every choice's true runtime and cost is known and nothing is
guessed. Policies compared, per sweep point, with the deadline a multiple of the fastest true
runtime among the candidates:

- ``predicted p50`` / ``predicted p90``: the cheapest candidate whose predicted median (or
  upper 90 % interval bound) meets the deadline; if none does, the fastest by that prediction.
- ``static``: one fixed mid-size configuration for every point (the middle of the candidates
  ordered by price), what a team without a model runs.
- ``largest``: the most expensive candidate, always.
- ``oracle``: the cheapest candidate whose true runtime meets the deadline.

Cost of a run = true runtime × hourly price. Saving is against ``static``; regret is the extra
cost over ``oracle``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from autofe.errors import ConfigError

DEADLINE_FACTOR = 1.5


@dataclass(frozen=True)
class Option:
    """One candidate configuration of one sweep point, with its truth and its predictions."""

    point: str
    config: str
    hourly_price: float
    actual_s: float
    p50_s: float
    p90_high_s: float

    @property
    def cost(self) -> float:
        return self.actual_s * self.hourly_price / 3600.0


@dataclass(frozen=True)
class PolicyResult:
    """What one policy's choices cost and how many deadlines they met."""

    policy: str
    points: int
    cost: float
    deadlines_met: float
    saving_vs_static: float
    regret_vs_oracle: float

    def as_dict(self) -> dict[str, object]:
        return {
            "policy": self.policy,
            "points": self.points,
            "cost_usd": round(self.cost, 6),
            "deadlines_met": round(self.deadlines_met, 4),
            "saving_vs_static": round(self.saving_vs_static, 4),
            "regret_vs_oracle": round(self.regret_vs_oracle, 4),
        }


Chooser = Callable[[Sequence[Option], float, str], Option]


def _by_prediction(estimate: Callable[[Option], float]) -> Chooser:
    def choose(options: Sequence[Option], deadline: float, static: str) -> Option:
        meeting = [o for o in options if estimate(o) <= deadline]
        if meeting:
            return min(meeting, key=lambda o: (o.hourly_price * estimate(o), o.config))
        return min(options, key=lambda o: (estimate(o), o.config))

    return choose


def _static(options: Sequence[Option], deadline: float, static: str) -> Option:
    return next(o for o in options if o.config == static)


def _largest(options: Sequence[Option], deadline: float, static: str) -> Option:
    return max(options, key=lambda o: (o.hourly_price, o.config))


def _oracle(options: Sequence[Option], deadline: float, static: str) -> Option:
    meeting = [o for o in options if o.actual_s <= deadline]
    if meeting:
        return min(meeting, key=lambda o: (o.cost, o.config))
    return min(options, key=lambda o: (o.actual_s, o.config))


POLICIES: tuple[tuple[str, Chooser], ...] = (
    ("predicted p50", _by_prediction(lambda o: o.p50_s)),
    ("predicted p90", _by_prediction(lambda o: o.p90_high_s)),
    ("static", _static),
    ("largest", _largest),
    ("oracle", _oracle),
)


def static_config(options: Iterable[Option]) -> str:
    """The fixed mid-size configuration: the middle of the candidates ordered by price.

    >>> opts = [Option("p", c, price, 1, 1, 1) for c, price in (("a", 1), ("b", 2), ("c", 4))]
    >>> static_config(opts)
    'b'
    """
    prices: dict[str, float] = {}
    for o in options:
        prices.setdefault(o.config, o.hourly_price)
    ordered = sorted(prices, key=lambda c: (prices[c], c))
    if not ordered:
        raise ConfigError("no sweep options to choose among")
    return ordered[len(ordered) // 2]


def compare_policies(
    options: Iterable[Option], deadline_factor: float = DEADLINE_FACTOR
) -> list[PolicyResult]:
    """Every policy on the comparable sweep points (see :func:`comparable_points`).

    Raises:
        ConfigError: no complete sweep point, or a deadline factor below 1.
    """
    if deadline_factor < 1.0:
        raise ConfigError(f"deadline factor must be at least 1, not {deadline_factor}")
    options = list(options)
    static = static_config(options)
    points = comparable_points(options, static)
    if not points:
        raise ConfigError(f"no sweep point ran the static configuration {static} and another")
    picks = {name: _picks(choose, points, deadline_factor, static) for name, choose in POLICIES}
    base, best = _cost(picks["static"]), _cost(picks["oracle"])
    return [
        PolicyResult(
            name,
            len(points),
            _cost(chosen),
            sum(met for _, met in chosen) / len(chosen),
            1.0 - _cost(chosen) / base if base else 0.0,
            _cost(chosen) / best - 1.0 if best else 0.0,
        )
        for name, chosen in picks.items()
    ]


def comparable_points(options: Iterable[Option], static: str) -> dict[str, list[Option]]:
    """Sweep points every policy can be judged on: the static configuration and one other ran.

    A lab sweep runs every candidate; a third-party table may lack some (runs that failed or
    timed out), and then the policies choose among the configurations that did run.
    """
    points: dict[str, list[Option]] = {}
    for o in options:
        points.setdefault(o.point, []).append(o)
    return {
        p: sorted(opts, key=lambda o: o.config)
        for p, opts in sorted(points.items())
        if len(opts) >= 2 and static in {o.config for o in opts}
    }


def _picks(
    choose: Chooser, points: Mapping[str, Sequence[Option]], factor: float, static: str
) -> list[tuple[Option, bool]]:
    chosen = []
    for opts in points.values():
        deadline = factor * min(o.actual_s for o in opts)
        pick = choose(opts, deadline, static)
        chosen.append((pick, pick.actual_s <= deadline))
    return chosen


def _cost(chosen: Sequence[tuple[Option, bool]]) -> float:
    return sum(o.cost for o, _ in chosen)
