"""The one compiled part: the line-protocol decoder's fast path in C (schemas/plain_lines.c), and
the replay's reads of its pieces' lines (schemas/plain_pieces.c).

Optional: where no C compiler is found the install goes on, and the decoder reads the same
lines with numpy (schemas/line_decoder.py), more slowly. ``REFLEX_PURE_PYTHON=1`` leaves it
out and builds a wheel for any Python 3.10+ (``py3-none-any``): what a training node's hook
needs. Everything else is in pyproject.toml.
"""

import os

from setuptools import Extension, setup

decoder = Extension(
    "reflex_localize.schemas.plain_lines",
    ["schemas/plain_lines.c", "schemas/plain_pieces.c"],
    depends=["schemas/plain_common.h"],
    optional=True,
)
setup(ext_modules=[] if os.environ.get("REFLEX_PURE_PYTHON") == "1" else [decoder])
