"""One module per CLI subcommand, each with `run(args) -> int` (the interface layer)."""
