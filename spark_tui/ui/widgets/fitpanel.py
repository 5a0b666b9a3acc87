"""The fit panel: the FitReport of the selected recipe on the current nodes."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

GIB = 1024**3
VERDICT_STYLE = {
    "fits": ("fits", "bold green"),
    "fits_with_warnings": ("fits, with warnings", "bold yellow"),
    "does_not_fit": ("does not fit", "bold red"),
    "unknown": ("unknown", "bold magenta"),
}


def _gib(value: Any) -> str:
    return "?" if value is None else f"{value / GIB:.1f}"


def render_fit(
    report: dict[str, Any] | None, problem: str | None = None, wide: bool = True
) -> Table | Text:
    """Verdict, layout, per-node memory table, then findings with remedies."""
    if not report:
        return Text(problem, style="red") if problem else Text("select a recipe", style="dim")
    grid = Table.grid(padding=(0, 1))
    label, style = VERDICT_STYLE.get(report["verdict"], (report["verdict"], ""))
    par = report.get("parallel") or {}
    layout = ""
    if par:
        tp = par.get("tensor_parallel", 1)
        pp = par.get("pipeline_parallel", 1)
        dp = par.get("data_parallel", 1)
        ranks, nodes_n = tp * pp * dp, par.get("nodes", "?")
        if report.get("nodes_left_out"):  # a subset runs: count every node given
            nodes_n = len(report.get("nodes_used") or []) + len(report["nodes_left_out"])
        layout = (
            f"TP{tp} x PP{pp} x DP{dp} = {ranks} of {nodes_n} nodes"
            if wide
            else f"TP{tp}·PP{pp}·DP{dp} on {ranks}/{nodes_n} nodes"
        )
    grid.add_row(
        Text(label, style=style) + Text("  " if wide else "\n") + Text(layout, style="dim")
    )
    image = report.get("image_resolved")
    if image:
        # The sentinel a launch runs as a dated nightly: which one, and which build.
        digest = str(image.get("digest", "")).removeprefix("sha256:")[:12]
        if wide:
            line = f"image {image.get('image')} {digest} (newest nightly)"
        else:  # the repository does not fit a narrow panel: the nightly's date tag does
            line = f"nightly {image.get('tag')} {digest}"
        grid.add_row(Text(line, style="dim"))
    if problem:
        grid.add_row(Text(problem, style="red"))
    if report.get("missing"):
        grid.add_row(Text("missing facts: " + ", ".join(report["missing"]), style="magenta"))
    table = Table(box=None, padding=(0, 1), show_edge=False, header_style="dim")
    for col in ("node", "budget", "weights", "KV", "1 req", "conc"):
        table.add_column(col, justify="right" if col != "node" else "left")
    nodes = list(report.get("nodes", []))
    shown = ("budget_bytes", "weights_bytes", "kv_budget_bytes", "kv_per_request_bytes")
    figures = [
        tuple(_gib(n.get(k)) for k in shown) + (round(n.get("max_concurrency") or 0, 1),)
        for n in nodes
    ]
    if len(nodes) > 1 and all(f == figures[0] for f in figures):
        # Same memory on every node (the usual case): one row says it for all of them.
        nodes = [{**nodes[0], "name": f"each of {len(nodes)}" if wide else f"x{len(nodes)}"}]
    for node in nodes:
        conc = node.get("max_concurrency")
        cells = (
            _gib(node.get("budget_bytes")),
            _gib(node.get("weights_bytes")),
            _gib(node.get("kv_budget_bytes")),
            _gib(node.get("kv_per_request_bytes")),
            "?" if conc is None else f"{conc:.1f}x",
        )
        if wide:
            table.add_row(str(node["name"]), *cells)
        else:
            grid.add_row(
                Text(f"{node['name']} ", style="bold")
                + Text(f"budget {cells[0]} GiB\n")
                + Text(f"weights {cells[1]} KV {cells[2]}\n1 req {cells[3]} ")
                + Text(f"conc {cells[4]}", style="bold")
            )
    if report.get("nodes") and wide:
        grid.add_row(table)
    sev_style = {"error": "red", "warning": "yellow", "info": "dim"}
    order = {"error": 0, "warning": 1}
    findings = sorted(report.get("findings", []), key=lambda f: order.get(f["severity"], 2))
    for finding in findings:
        line = Text(f"{finding['severity']}: ", style=sev_style.get(finding["severity"], ""))
        line.append(finding["message"])
        if finding.get("remedy"):
            line.append(f"\n  → {finding['remedy']}", style="dim")
        grid.add_row(line)
    return grid


class FitPanel(VerticalScroll, can_focus=True):
    """Scrollable fit report."""

    DEFAULT_CSS = """
    FitPanel { border: round $panel-lighten-2; padding: 0 1; height: 1fr;
               scrollbar-size-vertical: 1; }
    FitPanel:focus { border: round $primary; }
    """

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static(render_fit(None), id="fit-body")

    def on_mount(self) -> None:
        self.border_title = "Fit"

    @property
    def report(self) -> dict[str, Any] | None:
        """The fit report shown (None: none yet)."""
        shown = getattr(self, "_shown", None)
        return shown[0] if shown else None

    def show(self, report: dict[str, Any] | None, problem: str | None = None) -> None:
        self._shown = (report, problem)
        wide = self.size.width >= 44 or self.size.width == 0
        self.query_one("#fit-body", Static).update(render_fit(report, problem, wide))

    def on_resize(self) -> None:
        if hasattr(self, "_shown"):
            self.show(*self._shown)
