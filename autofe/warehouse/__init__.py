"""The DuckDB telemetry warehouse: schema with availability tags, connection, writers."""
