"""Beside search: fitting the step model's terms. Published and user runs as layouts and their
predictions (published.py), the published-run fit: bounds, weights, loss, coordinate search (fit.py),
a user's regularised fit (regularise.py) and training-log readers (runlogs/: one module per framework).
Imports models, layout and step; never search or emit."""
