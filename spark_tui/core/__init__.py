"""Domain layer: pure data and rules, no I/O beyond reading files it is handed."""
