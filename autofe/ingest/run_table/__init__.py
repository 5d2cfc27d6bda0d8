"""Ingest generic run tables (CSV, CSV.gz, Parquet) into the warehouse, driven by a TOML mapping.

A mapping file names the table(s), the label column and its unit, how run and job ids are made,
which columns describe the cluster, and whether each remaining column is known at submit or
only after the run. Every column must be assigned (or swept up by ``"*"``): a column nobody
looked at is exactly how a measured value ends up tagged as known before the run. The format is
documented in ``docs/mappings.md``; shipped examples live in ``examples/mappings/``.

The modules, in the order :func:`~autofe.ingest.run_table.ingest_run_table.ingest_run_table`
uses them:

- :mod:`.mapping`: read and validate the mapping file; which columns become attributes;
- :mod:`.table_files`: find the table files it names and read each one with DuckDB;
- :mod:`.run_rows`: one table row to its runs, jobs, cluster_configs and run_attributes rows,
  from cells read by :mod:`.cells`;
- :mod:`.store`: write one table's rows, ledger entry and issues in one transaction.
"""
