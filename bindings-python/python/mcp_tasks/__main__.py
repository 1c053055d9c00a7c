"""``python -m mcp_tasks``: the ``mcp-tasks`` admin CLI (list, show, cancel, purge, tail, stats over
``sqlite://`` and ``postgres://`` store URLs), the same program as the Rust binary, run by the
native module. ``python -m mcp_tasks --help`` lists the commands."""

from __future__ import annotations

import signal
import sys

from ._native import admin_main


def main() -> int:
    # Ctrl-C ends the program (tail runs until interrupted) instead of waiting for the native
    # call to return to Python, which would only then raise KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.stdout.flush()
    # The name usage messages show: the installed script's, or how this module was started.
    name = "mcp-tasks" if sys.argv[0].endswith("mcp-tasks") else "python -m mcp_tasks"
    return admin_main([name, *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
