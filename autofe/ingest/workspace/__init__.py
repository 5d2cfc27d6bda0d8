"""Ingest a Databricks workspace export: jobs, runs, clusters, scripts, table stats, event logs.

A workspace is what a user exports with the Databricks CLI / REST API (``jobs/list``,
``jobs/runs/list``, ``runs/get``, ``clusters/get``) plus the cluster log delivery folder. The
layout, what each file must contain and the rules that link event logs to runs are documented
in ``docs/workspace.md``.

The modules, in the order :func:`~autofe.ingest.workspace.ingest_workspace.ingest_workspace`
uses them:

- :mod:`.inputs`: find the workspace's files (and its event logs) and read each one;
- :mod:`.catalog`: merge the jobs, runs and clusters across the files that mention them;
- :mod:`.file_output`: one file's rows, from :mod:`.clusters`, :mod:`.jobs` (with
  :mod:`.scripts`), :mod:`.runs` and :mod:`.table_stats`, checked by ``conform_row``;
- :mod:`.store`: write a batch of files in one transaction, with their ledger entries;
- :mod:`.linking`: the linker that ties an event log's application to its run.

:mod:`.api_values` reads the API's loosely typed values and :mod:`.issues` words the
problems; every module below the entry point uses them.
"""
