"""Following a run still training: a task in the notebook's event loop that polls the view every few seconds."""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol


class Followed(Protocol):
    """What the loop needs of the view it follows."""

    follow: bool
    follow_interval: float
    status: str

    def poll(self) -> bool: ...


class Follower:
    """Starts and stops the polling task of one view; ``task`` is None while none runs."""

    def __init__(self, view: Followed):
        self.view = view
        self.task: asyncio.Task | None = None

    def start(self) -> None:
        """Poll in the running event loop; a RuntimeError where none runs (a plain script would block)."""
        if self.task is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("follow=True needs a running event loop, as in Jupyter; "
                               "call view.poll() to look at the logs yourself") from None
        self.task = loop.create_task(self._loop())

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            self.task = None

    async def _loop(self) -> None:
        view = self.view
        try:
            while view.follow:
                await asyncio.sleep(view.follow_interval)
                try:
                    view.poll()
                except Exception as e:  # noqa: BLE001 - shown in the view, then we keep watching
                    logging.getLogger("rlviz_widgets").exception("follow: reading the logs failed")
                    view.status = f"follow: {e}"  # (shown as text)
        finally:
            self.task = None
