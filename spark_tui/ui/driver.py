"""A Textual Linux driver that notices when the terminal goes away.

Textual's own input thread keeps polling a stdin that has reached end-of-file (a closed
pipe, a hung-up SSH session) and never tells the app: the cockpit would spin on a dead
terminal and leave its cluster (and in the demo, its simulated Sparks) behind. This driver
reads stdin the same way, and on EOF or a read error it asks the app to end cleanly
(`SparkApp.terminal_gone`) instead.
"""

from __future__ import annotations

import os
import selectors
from codecs import getincrementaldecoder

from textual._parser import ParseError
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver


class CockpitDriver(LinuxDriver):
    """`LinuxDriver` whose input thread ends the app when stdin ends (see module doc)."""

    def run_input_thread(self) -> None:
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")(errors="replace").decode
        gone = False
        try:
            while not self.exit_event.is_set():
                for _key, mask in selector.select(0.1):
                    if not mask & selectors.EVENT_READ:
                        continue
                    try:
                        data = os.read(self.fileno, 4096)
                    except OSError:  # EIO: the terminal hung up
                        data = b""
                    if not data:
                        gone = True
                        break
                    for event in parser.feed(decode(data)):
                        self.process_message(event)
                for event in parser.tick():
                    self.process_message(event)
                if gone:
                    break
        finally:
            selector.close()
            try:
                for _event in parser.feed(""):
                    pass
            except (EOFError, ParseError):
                pass
        if gone and not self.exit_event.is_set():
            callback = getattr(self._app, "terminal_gone", None)
            if callback is not None:
                self._loop.call_soon_threadsafe(callback, "stdin closed")
