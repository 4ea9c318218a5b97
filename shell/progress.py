"""Progress bars for the long commands (``eval``, ``fit``, ``simulate --influx``), on stderr
and only on a terminal: in a pipe, a log or CI nothing is drawn, and stdout stays clean for
``--json``.

>>> import io
>>> from rich.console import Console
>>> quiet = Console(file=io.StringIO())  # not a terminal: no bar, the work still runs
>>> with ProgressBar(3, "runs", console=quiet) as bar:
...     for name in ("a", "b", "c"):
...         with bar.step(name):
...             pass
>>> bar.done, quiet.file.getvalue()
(3, '')
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class ProgressBar:
    """``total`` steps; :meth:`step` shows what runs now and advances when it ends."""

    def __init__(self, total: int, description: str, *, console: Console | None = None) -> None:
        self.total, self.done = total, 0
        console = console or Console(stderr=True)
        self._progress: Progress | None = None
        if console.is_terminal:
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[now]}"),
                console=console,
                transient=True,
            )
            self._task = self._progress.add_task(description, total=total, now="")

    def __enter__(self) -> ProgressBar:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()

    @contextmanager
    def step(self, now: str, amount: int = 1) -> Iterator[None]:
        if self._progress is not None:
            self._progress.update(self._task, now=now)
        yield
        self.advance(amount)

    def advance(self, amount: int = 1) -> None:
        self.done += amount
        if self._progress is not None:
            self._progress.update(self._task, advance=amount)
