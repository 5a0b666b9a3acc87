"""Modal screens: confirmations, host keys, setting editor, history, help."""
