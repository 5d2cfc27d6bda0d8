"""Runtime models: LightGBM on log duration, time-ordered splits, conformal intervals, artifacts."""
