"""Nothing of the web demo is imported unless `--web` is given: the headless commands and the
terminal cockpit start as fast as before (each probe in a fresh interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys

WEB = ("aiohttp", "aiohttp_jinja2", "textual_serve", "playwright", "spark_tui.ui.web")

PROBE = """
import json, sys
{imports}
loaded = sorted(m for m in sys.modules if m.split('.')[0] in {roots!r}
                or m == 'spark_tui.ui.web' or m.startswith('spark_tui.ui.web.'))
print(json.dumps(loaded))
"""


def loaded_after(imports: str) -> list[str]:
    code = PROBE.format(imports=imports, roots={w for w in WEB if "." not in w})
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return list(json.loads(result.stdout))


def test_the_terminal_cockpit_imports_nothing_of_the_web() -> None:
    # What `spark-tui demo` (and the cockpit) load before the first frame.
    assert (
        loaded_after(
            "import spark_tui.cli, spark_tui.commands.demo, spark_tui.ui.demo_app, "
            "spark_tui.ui.app, spark_tui.ui.runner\n"
            "spark_tui.cli.build_parser().parse_args(['demo'])"
        )
        == []
    )


def test_the_probe_sees_the_web_part_when_it_is_imported() -> None:
    # The probe above could not pass by looking at the wrong names.
    assert "spark_tui.ui.web.server" in loaded_after("import spark_tui.ui.web.server")
    assert "textual_serve" in loaded_after("import spark_tui.ui.web.server")
