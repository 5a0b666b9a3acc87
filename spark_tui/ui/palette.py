"""Command palette entries: every cockpit action, plus switching themes."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

ACTIONS = [
    ("launch", "Launch the selected recipe", "start one container per rank (after the fit check)"),
    ("stop", "Stop the cluster", "remove every rank's container on every node"),
    ("smoke", "Run the smoke checks", "health, models, chat, tool call, streaming"),
    (
        "bench",
        "Run the benchmark",
        "concurrency sweep (TTFT, ITL, tokens/s) of a workload: lengths, shared prefix, depth",
    ),
    (
        "edit",
        "Edit one setting and relaunch",
        "same change on every rank, compared with the baseline",
    ),
    (
        "sync",
        "Sync the model and the image to every node",
        "the selected recipe's model (and draft) and image: downloaded once, copied node to node",
    ),
    ("history", "Show the run history", "launches (failed ones too), smoke runs, benchmarks"),
    (
        "results",
        "Show the results in full",
        "the last benchmark's every figure and the comparison with its noise",
    ),
    (
        "reset_baseline",
        "Reset the tuning baseline",
        "the next change measures a new baseline first (pick one: b in the history)",
    ),
    ("refresh", "Refresh the nodes", "probe every node again"),
    (
        "copy_tunnel",
        "Copy the tunnel command",
        "to the clipboard (OSC 52): reach the API from your machine",
    ),
    ("filter", "Filter", "recipes or log lines"),
    ("fullscreen", "Full-screen log pane", "toggle"),
    ("compact", "Compact or full log lines", "vLLM's process, time and source prefixes"),
    ("help", "Help", "every key"),
    ("quit_cockpit", "Quit", "asks first when a cluster is running"),
]


class CockpitCommands(Provider):
    """Every action the keys have, and the themes."""

    def _entries(self) -> list[tuple[str, str, object]]:
        app = self.app
        entries: list[tuple[str, str, object]] = [
            (title, help_text, partial(app.run_action, action))
            for action, title, help_text in ACTIONS
        ]
        # The bundled themes and the user's (from the config dir); Textual's own are under
        # its "Change theme" command.
        ours = getattr(app, "theme_names", None) or [
            n for n in app.available_themes if n.startswith("spark-")
        ]
        for name in sorted(ours):
            entries.append(
                (f"Theme: {name}", "switch the colour theme", partial(setattr, app, "theme", name))
            )
        return entries

    async def discover(self) -> Hits:
        for title, help_text, callback in self._entries():
            yield DiscoveryHit(title, callback, help=help_text)  # type: ignore[arg-type]

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self._entries():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)  # type: ignore[arg-type]
