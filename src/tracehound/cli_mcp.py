"""Command line: `tracehound mcp [--baselines LOCATION]`, the MCP server over stdio.

The server itself is `tracehound.mcp_server`; this module only registers the command, checks
that the `mcp` SDK is installed (else: exit 2 with the install hint) and keeps every log line
on stderr, since stdout carries the protocol.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
from typing import Any, TextIO

from tracehound.files import InputError

__all__ = ["INSTALL_HINT", "add_mcp_parser", "cmd_mcp"]

EXIT_OK = 0
INSTALL_HINT = "tracehound mcp needs the MCP SDK: pip install 'tracehound[mcp]'"


def add_mcp_parser(sub: Any) -> None:
    """Register `tracehound mcp` on the main parser's subcommands."""
    parser = sub.add_parser(
        "mcp",
        help="serve the run history and the baselines to coding agents (MCP over stdio)",
        description="Serve tracehound's run history and drift baselines as MCP tools over "
        "stdin/stdout, for an MCP client (Claude Code, Cursor, VS Code …) to start. Logs go "
        "to stderr. Needs tracehound[mcp].",
    )
    parser.add_argument(
        "--baselines",
        metavar="LOCATION",
        help="the store: an SQLite file, 'memory', or a redis:// URL (default: "
        "$TRACEHOUND_BASELINES, else $XDG_STATE_HOME/tracehound/baselines.sqlite3)",
    )
    parser.set_defaults(handler=cmd_mcp)


def cmd_mcp(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from tracehound.baselines import BaselineStoreError, check_location
    from tracehound.cli_runs import store_location

    location: str | None = args.baselines
    chosen, source = store_location(location)
    try:  # fail fast on a typo; an unreachable store is each call's error
        check_location(chosen)
    except BaselineStoreError as exc:
        raise InputError(f"{source}: {exc}") from None
    if importlib.util.find_spec("mcp") is None:
        raise InputError(INSTALL_HINT)
    try:
        from tracehound.mcp_server import serve
    except ImportError as exc:  # an SDK too old (1.x) or broken: the hint and the reason
        raise InputError(f"{INSTALL_HINT} ({exc})") from None
    # stdout is the protocol: every log line goes to stderr, and only warnings and errors
    logging.basicConfig(
        stream=err, level=logging.WARNING, format="tracehound mcp: %(levelname)s %(message)s"
    )
    serve(location)
    return EXIT_OK
