"""`python -m spark_tui.sim.hub [--port N] [--token T]`: run the SIMULATED Hub with every
model of the simulated catalogue (gated ones open to --token), until interrupted.

Point HF_ENDPOINT at the printed address to use it instead of huggingface.co.
"""

from __future__ import annotations

import argparse
import signal
import threading

from spark_tui.sim.hub.catalogue_hub import catalogue_hub


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_tui.sim.hub", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    parser.add_argument("--token", default=None, help="the token gated models accept")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with catalogue_hub(token=args.token, port=args.port) as hub:
        print(f"HF_ENDPOINT={hub.endpoint}", flush=True)
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
