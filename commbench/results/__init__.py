"""What measurements become: Measurement / RunHeader records and their JSONL file (records),
provenance, the regression gate (compare, compare_judge, noise), tables (render), nccl-tests text
(nccl_tests_text), plots and Markdown
(report), and importers of other tools' output (importers/)."""
