"""Shared evaluation fixtures."""

from __future__ import annotations

import pytest

from autofe.featurespec import FeatureSpec


@pytest.fixture(scope="session")
def same_config_last() -> FeatureSpec:
    """The latest earlier successful run of the job on the same configuration: pure history of
    the held-out group under a configuration or machine-type protocol."""
    return FeatureSpec(
        name="same_config_last_s",
        category="history",
        sql=(
            "SELECT t.run_id, (SELECT h.duration_s FROM runs AS h "
            "WHERE h.cluster_config_id = t.cluster_config_id AND h.job_id = t.job_id "
            "AND h.status = 'SUCCEEDED' AND h.end_time < t.submit_time "
            "ORDER BY h.end_time DESC, h.run_id DESC LIMIT 1) AS value FROM runs AS t"
        ),
    )
