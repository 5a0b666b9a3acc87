"""The demo cockpit in a browser (`spark-tui demo --web`): textual-serve behind a token,
one app process with its own simulated Sparks per visitor. Imported only with --web."""
