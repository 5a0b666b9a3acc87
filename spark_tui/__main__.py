"""`python -m spark_tui` runs the CLI."""

from spark_tui.cli import main

raise SystemExit(main())
