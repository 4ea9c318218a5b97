"""The shell: the ``reflex`` command (one module per subcommand), the demo, incident reports,
eval and fit harnesses.

May import every package.
"""
