"""The read-only SQL sandbox every agent or user statement runs in."""
