"""The cockpit's own themes, as Textual themes (a user's themes are YAML files with the same
fields, in the config dir's `themes/`: see spark_tui.ui.themes)."""

from __future__ import annotations

from textual.theme import Theme

# Truecolor, the default.
SPARK_DARK = Theme(
    name="spark-dark",
    dark=True,
    primary="#76B900",  # NVIDIA green
    secondary="#4FA3E0",
    accent="#E0A526",
    warning="#E0A526",
    error="#E5534B",
    success="#57AB5A",
    foreground="#D8DEE4",
    background="#0F1214",
    surface="#171B1F",
    panel="#20262C",
    variables={"footer-key-foreground": "#76B900"},
)

# Truecolor, for bright terminals and projectors.
SPARK_LIGHT = Theme(
    name="spark-light",
    dark=False,
    primary="#3D7A00",
    secondary="#1F6FB2",
    accent="#A86A00",
    warning="#A86A00",
    error="#C62828",
    success="#2E7D32",
    foreground="#1D2125",
    background="#FAFAF7",
    surface="#EEF0EA",
    panel="#E0E4DA",
)

# Only the terminal's own ANSI palette: for old terminals, slow links and users who set their
# colours in the terminal itself (and NO_COLOR).
SPARK_ANSI = Theme(
    name="spark-ansi",
    dark=True,
    ansi=True,
    primary="ansi_bright_green",
    secondary="ansi_cyan",
    accent="ansi_yellow",
    warning="ansi_yellow",
    error="ansi_red",
    success="ansi_green",
    foreground="ansi_default",
    background="ansi_default",
    surface="ansi_default",
    panel="ansi_default",
    boost="ansi_default",
    variables={
        # An ANSI theme must name these itself (Textual's widgets draw with them).
        "ansi-background": "ansi_black",
        "ansi-foreground": "ansi_white",
        "screen-selection-background": "ansi_bright_blue",
        "screen-selection-foreground": "ansi_black",
        "input-cursor-text-style": "none",
        "input-selection-foreground": "ansi_black",
        "block-cursor-background": "ansi_green",
        "block-cursor-foreground": "ansi_black",
        "block-cursor-text-style": "none",
        "footer-key-foreground": "ansi_bright_green",
        "footer-background": "ansi_default",
        "footer-description-foreground": "ansi_default",
        "input-cursor-background": "ansi_white",
        "input-cursor-foreground": "ansi_black",
        "input-selection-background": "ansi_blue",
        "scrollbar": "ansi_bright_black",
        "scrollbar-hover": "ansi_white",
        "scrollbar-active": "ansi_bright_white",
        "scrollbar-background": "ansi_default",
        "scrollbar-corner-color": "ansi_default",
        "border": "ansi_bright_black",
        "border-blurred": "ansi_bright_black",
    },
)

BUNDLED_THEMES = (SPARK_DARK, SPARK_LIGHT, SPARK_ANSI)
