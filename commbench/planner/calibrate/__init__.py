"""Beside search: fitting the step model's terms. Published and user runs (published.py: rows,
weights, the fit, predictions) and training-log readers (runlogs.py). Imports models, layout and
step; never search or emit."""
