"""The analyzer, extractor and evaluator agents, and the gates features must pass."""
