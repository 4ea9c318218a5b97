"""``python -m reflex_localize``: the ``reflex`` command under a name no other package claims
(the PyPI web framework called reflex installs a ``reflex`` script of its own)."""

from reflex_localize.shell.cli import main

main(prog_name="reflex")
