"""Configuration choice on CherryPick: generated features never price a configuration with its
own runs' outcomes, and with nothing generated the masked path is the plain one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from autofe.evals.choice import config_choice_options, generated_choice_options
from autofe.evals.cost import compare_policies
from autofe.evals.masked import masked_values
from autofe.evals.protocols import CLUSTER_COLUMNS, raw_values
from autofe.featurespec import FeatureSpec
from autofe.modeling.dataset import FeatureValues

# how fast the run's configuration ran the other jobs: a strong signal, and one the grouped
# protocol must not let the priced configuration see (CherryPick runs each job once per config)
SAME_CONFIG_OTHER_JOBS = FeatureSpec(
    name="same_config_other_jobs_s",
    category="history",
    sql=(
        "SELECT t.run_id, (SELECT avg(ln(h.duration_s)) FROM runs AS h "
        "WHERE h.cluster_config_id = t.cluster_config_id AND h.job_id <> t.job_id "
        "AND h.status = 'SUCCEEDED') AS value FROM runs AS t"
    ),
)


@pytest.fixture(scope="module")
def cherrypick_db(mapping_db: Callable[[str], Path]) -> Path:
    return mapping_db("cherrypick")


@pytest.fixture(scope="module")
def raw(cherrypick_db: Path) -> FeatureValues:
    return raw_values(cherrypick_db, CLUSTER_COLUMNS)


def test_with_nothing_generated_the_masked_path_is_the_plain_one(
    cherrypick_db: Path, raw: FeatureValues
) -> None:
    (masked,) = generated_choice_options(cherrypick_db, [], {"raw": raw}).values()
    assert masked == config_choice_options(cherrypick_db, raw)
    assert len({o.point for o in masked}) >= 4 and all(o.p90_high_s >= o.p50_s for o in masked)


def test_a_configuration_is_priced_without_its_own_runs(
    cherrypick_db: Path, raw: FeatureValues
) -> None:
    """The feature reads only the run's own configuration: computed out of fold it is blank for
    every run, priced and calibration runs alike, so the choice is that of a blank column."""
    extras = {"history + raw": raw}
    honest = generated_choice_options(cherrypick_db, [SAME_CONFIG_OTHER_JOBS], extras)
    open_values = masked_values(cherrypick_db, [SAME_CONFIG_OTHER_JOBS], [])
    (by_run,) = open_values.values()
    assert sum(v is not None for v in by_run.values()) > len(by_run) / 2  # it does read them
    blank = {SAME_CONFIG_OTHER_JOBS.name: dict.fromkeys(by_run)}
    assert honest["history + raw"] == config_choice_options(cherrypick_db, {**raw, **blank})
    peeking = config_choice_options(cherrypick_db, {**raw, **open_values})
    assert [o.p50_s for o in peeking] != [o.p50_s for o in honest["history + raw"]]
    assert {r.policy for r in compare_policies(peeking)} >= {"predicted p50", "predicted p90"}
