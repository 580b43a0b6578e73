"""Stage 4: which layout wins. The layout space and its search, Pareto front and ranks (space.py);
why a runner-up loses (explain.py). Imports models, layout and step."""
