"""The Textual cockpit. The only package that imports Textual."""
