"""The service layer: one Textual-free object per cockpit or CLI run (`Session`) that owns
the connection pool and the cluster, with each user action as one async generator of typed
events (`service.events`); the CLI and the cockpit only render them.

`service.events` is loaded when one of its names is first used, not when it is imported:
its forty-odd frozen dataclasses (each compiles its own methods) cost the cockpit's first
frame a tenth of a minimal Textual app's start, and the first frame shows no event.
"""

import importlib.util
import sys


def _load_on_first_use(name: str) -> None:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or name in sys.modules:
        return
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    # As the package's attribute too: `from spark_tui.service import events` then takes it
    # as it is (the import system would otherwise look at it, and so load it).
    package, _, child = name.rpartition(".")
    setattr(sys.modules[package], child, module)


_load_on_first_use(f"{__name__}.events")
