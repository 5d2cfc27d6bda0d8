"""Ingest pipelines: turn event logs, workspaces and run tables into warehouse rows."""
