"""Retrieval evaluation of the knowledge base against labelled symptom queries."""
