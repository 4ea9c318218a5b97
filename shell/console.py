"""The ``reflex`` console script. A plain ``pip install reflex-localize`` is the training hook
alone, with no dependency at all, so this first step imports nothing but the standard library
and says which install the commands need instead of a traceback about click."""

from __future__ import annotations

import sys

HOOK_ONLY = (
    "reflex: this install is the training hook alone (no dependencies). The commands need an "
    "extra: pip install 'reflex-localize[agent]' (the node agent), '[flow]' (the flow) or "
    "'[all]' (eval, fit, reports, the demo)."
)


OLD_PYTHON = (
    "reflex: the commands need Python 3.11 or newer (this is Python {}.{}); on it, "
    "reflex-localize is the training hook alone."
)


def main() -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 (the hook's install reaches 3.10)
        sys.exit(OLD_PYTHON.format(*sys.version_info[:2]))
    try:
        from reflex_localize.shell.cli import main as cli_main
    except ModuleNotFoundError as error:
        if error.name != "click":
            raise
        sys.exit(HOOK_ONLY)
    cli_main()
