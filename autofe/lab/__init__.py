"""Lab: generate a Databricks-style workspace by running real jobs on local PySpark.

``autofe lab generate`` builds TPC-H data (``tpchgen-cli``) as date-partitioned Parquet, plans
runs of the lab jobs (``autofe.lab.jobs``) on a virtual calendar, runs each one in its own
Spark application with a drawn cluster configuration, and writes the workspace layout that
``autofe ingest`` reads (``docs/workspace.md``), event logs written by Spark itself included.
The design, the time mapping and how runtimes are measured are in ``docs/lab.md``.

Modules: ``data`` (TPC-H, partitioning, skew, growth), ``configs`` (cluster draws, node types,
prices), ``clock`` (virtual calendar), ``plan`` (which run does what), ``runner`` (one run on
local Spark), ``workspace_writer`` (the JSON files), ``generate`` (the pipeline), ``cli``.
PySpark is imported only inside this package.
"""
