"""Importers of other tools' output into commbench records (nccl-tests text and -J JSON)."""
