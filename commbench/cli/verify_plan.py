"""`commbench verify-plan plan.json` (placeholder until verify lands)."""
