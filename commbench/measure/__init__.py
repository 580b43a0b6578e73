"""One bench job on a rank: the harness (data check, warm-up, timed loop, cross-rank reduction),
sub-group sweeps, the live view, and the backend comparison. Writes records (commbench.results)."""
