"""Commands that chain the stages: tune (sweep -> fit -> plan) and verify (re-measure a plan's
collectives and set them beside the prediction)."""
