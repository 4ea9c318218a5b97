"""Recovery state written by an older Reflex, restored by a newer one.

Bytewax snapshots a step's state by pickling it, and a flow upgraded in place resumes from
those snapshots. A dataclass that gained a field since would come back without it, and the
first window that reads it would fail. :class:`FieldsFilledOnRestore` gives such fields their
defaults when a state is unpickled (or deep-copied), so an upgrade keeps its baselines.

>>> import copy
>>> from dataclasses import dataclass, field
>>> @dataclass
... class Example(FieldsFilledOnRestore):
...     kept: int = 1
...     added: list = field(default_factory=list)
>>> old = Example(5)
>>> del old.__dict__["added"]  # as a snapshot of the version before the field came
>>> restored = copy.deepcopy(old)  # the same __setstate__ as unpickling
>>> restored.kept, restored.added
(5, [])
"""

from __future__ import annotations

import dataclasses
from typing import Any


class FieldsFilledOnRestore:
    """A dataclass mixin: fields missing from a restored state get their defaults."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        for spec in dataclasses.fields(self):  # type: ignore[arg-type]
            if spec.name in state:
                continue
            if spec.default is not dataclasses.MISSING:
                setattr(self, spec.name, spec.default)
            elif spec.default_factory is not dataclasses.MISSING:
                setattr(self, spec.name, spec.default_factory())
