"""Evaluations: retrieval quality now; manual-vs-generated model reports later."""
