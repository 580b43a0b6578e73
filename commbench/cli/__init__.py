"""The typer CLI: one module per command, each thin (parse, call, print)."""
