"""What measurements become: Measurement / RunHeader records and their JSONL file (records),
provenance, the regression gate (compare), tables and nccl-tests text (render), plots and Markdown
(report), and importers of other tools' output (importers/)."""
