"""The impact model file that a scheduled ``reflex fit-impact`` replaces, as the flow sees it.

A refit is meant to run nightly (``deploy/reflex-fit-impact.timer``) while the flow runs for
weeks, so the flow looks at the file again at most once a ``check_every_s`` (a ``stat``, no
read) and loads it when it changed. A new file that cannot be loaded (cut short, unknown
signals, a version that does not match its content) is logged and counted, and the model the
flow had stays: a bad refit never takes the learned evidence away, nor stops the flow.

>>> import tempfile
>>> from pathlib import Path
>>> path = Path(tempfile.mkdtemp()) / "impact.json"
>>> ImpactModel(("sm_clock_low",), (0.1,), 0.0).save(path)
>>> now = [0.0]
>>> watched = ImpactModelFile(path, check_every_s=60.0, clock=lambda: now[0])
>>> ImpactModel(("sm_clock_low",), (0.2,), 0.0).save(path)
>>> watched.current().coefficients  # checked a minute at most after the last look
(0.1,)
>>> now[0] = 61.0
>>> watched.current().coefficients, watched.reloads
((0.2,), 1)
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from reflex_localize.flows.impact.model import ImpactModel

_log = logging.getLogger(__name__)

# What identifies one version of the file on disk: a refit replaces it by rename (a new inode).
Stamp = tuple[int, int, int]


class ImpactModelFile:
    """The model at ``path``, loaded at start (a bad file is an error then) and again when the
    file changes; see the module docstring."""

    def __init__(
        self,
        path: Path,
        check_every_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self.check_every_s = check_every_s
        self.clock = clock
        self.model = ImpactModel.load(self.path)
        self.reloads = 0  # new versions taken
        self.failed_loads = 0  # changed files that could not be loaded (the old model kept)
        self._stamp = self._stamp_now()
        self._checked = clock()
        # When the model in memory was written: a nightly refit that keeps failing shows as
        # a model growing old (reflex_flow_impact_model_age_seconds).
        self.written_ns = self._stamp[1] if self._stamp else time.time_ns()

    def current(self) -> ImpactModel:
        now = self.clock()
        if now - self._checked < self.check_every_s:
            return self.model
        self._checked = now
        stamp = self._stamp_now()
        if stamp is None or stamp == self._stamp:
            return self.model  # unchanged, or gone for a moment: the model in memory stands
        self._stamp = stamp  # a file that failed is not retried until it changes again
        try:
            model = ImpactModel.load(self.path)
        except (OSError, ValueError, KeyError, TypeError) as error:
            self.failed_loads += 1
            _log.warning(
                "impact model %s changed but cannot be loaded (%s): keeping version %s",
                self.path, error, self.model.version,
            )  # fmt: skip
            return self.model
        if model.version != self.model.version:
            self.reloads += 1
            _log.info(
                "impact model %s: version %s -> %s (%s)",
                self.path, self.model.version, model.version,
                model.provenance.get("fitted_at", "fit time unknown"),
            )  # fmt: skip
        self.model, self.written_ns = model, stamp[1]
        return model

    def _stamp_now(self) -> Stamp | None:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return (info.st_ino, info.st_mtime_ns, info.st_size)
