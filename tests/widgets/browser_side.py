"""A widget's front end, played by the test: messages go through the widget's comm as ipywidgets delivers a
browser's (``comm.handle_msg`` -> ``Widget._handle_msg`` -> ``set_state`` or the custom-message callbacks), and
what the kernel publishes on the comm is recorded."""

from __future__ import annotations

import logging


class Browser:
    """The browser side of one widget's comm."""

    def __init__(self, widget):
        self.widget = widget
        self.published: list[tuple[dict, list]] = []  # (data, buffers) of the comm messages the kernel sent
        widget.comm.publish_msg = self._publish
        # ipywidgets' message handler catches what escapes (``_show_traceback``) and logs it: recorded here
        self.escaped: list[logging.LogRecord] = []
        log = logging.getLogger(f"browser_side.{id(self):x}")
        log.propagate = False
        log.handlers[:] = [_Recorder(self.escaped)]
        widget.log = log

    def _publish(self, msg_type, data=None, metadata=None, buffers=None, **_keys) -> None:
        self.published.append((data or {}, list(buffers or [])))

    def _deliver(self, data: dict, buffers=()) -> list[tuple[dict, list]]:
        self.published = []  # only the answers to the last message are kept (a fuzz run sends thousands)
        self.widget.comm.handle_msg({"content": {"comm_id": self.widget.comm.comm_id, "data": data},
                                     "buffers": list(buffers)})
        return self.published

    def custom(self, content) -> list[dict]:
        """Sends a custom message; returns the custom messages the kernel sent back."""
        return [d["content"] for d, _ in self._deliver({"method": "custom", "content": content})
                if d.get("method") == "custom"]

    def request(self, method, params=None, rid="b1") -> dict:
        """One rpc request, as rpc.ts sends it; returns its one reply (content)."""
        replies = [r for r in self.custom({"type": "rpc", "id": rid, "method": method, "params": params or {}})
                   if isinstance(r, dict) and r.get("type") == "rpc"]
        assert len(replies) == 1, replies
        return replies[0]

    def update(self, state: dict) -> dict:
        """Sets traits as a view's ``save_changes`` does; returns the state the kernel sent back after its echo
        (its own values of traits it did not take)."""
        sent = self._deliver({"method": "update", "state": state, "buffer_paths": []})
        back = {}
        for d, _ in sent:
            if d.get("method") == "update":
                back.update(d.get("state", {}))
        return back


class _Recorder(logging.Handler):
    def __init__(self, records: list):
        super().__init__(logging.WARNING)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)
