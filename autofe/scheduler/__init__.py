"""Compute budget scheduler: the cheapest configuration that meets a deadline, from intervals.

The planner prices every shape (instance type × node count) a job could run on in every
market (on-demand, spot) and region of the instance catalog, from the model's predicted
duration distribution; the queue admits jobs under budgets and priorities; runtime policies
react to preemptions and slipping progress; the simulator replays traces to measure all of it.
"""
