"""Spark SQL / Databricks / ML runtime know-how the analyzer searches: corpus, index, retrieval."""
