"""The RunView's hub: its parts' synced state and custom messages carried over the view's one comm, each namespaced
by part name. The parts are not displayed themselves; they keep their state, their requests and their checks of
what the browser sends (``BrowserState.take_update``, ``RpcWidget.take_message``), exactly as when shown alone.

Browser -> kernel (custom messages of the view):
  {type: "hello"}                                       -> {type: "snapshot", parts: {name: state}}
  {type: "part", part, state: {...}, client}            a part's update (refused names: sent back)
  {type: "part", part, msg: {...}} + buffers            a part's custom message (its rpc requests)
Kernel -> browser:
  {type: "part", part, state: {...}, origin?}           a part's changed traits (``origin``: the client whose
                                                        update they are, which already shows them)
  {type: "part", part, msg: {...}} + buffers            a part's custom message (rpc replies)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable

import ipywidgets as W

from rlviz_widgets.widgets._validate import clip

log = logging.getLogger("rlviz_widgets")
NOT_SENT = frozenset({"layout", "style", "tabbable", "tooltip"})  # ipywidgets' own (the composed view lays out)
MAX_CLIENT_CHARS = 64  # of a front end's id


def synced_keys(widget: W.Widget) -> list[str]:
    """The synced traits of ``widget`` a composed front end needs (not ipywidgets' and anywidget's own)."""
    return [k for k in widget.keys if not k.startswith("_") and k not in NOT_SENT]


class Hub:
    """Routes the state and messages of named parts through ``send`` (the composed widget's custom messages)."""

    def __init__(self, send: Callable[[dict, list], None]):
        self._send = send
        self._parts: dict[str, tuple[W.Widget, list[str]]] = {}
        self._taking: tuple[str, str, dict] | None = None  # (part, client, state) of the update being taken

    def add(self, name: str, widget: W.Widget, keys: Iterable[str] | None = None) -> None:
        """Carry ``widget``'s synced traits (``keys``, default all but ipywidgets' own) as part ``name``; front ends
        already open are sent its state."""
        keys = list(keys) if keys is not None else synced_keys(widget)
        self._parts[name] = (widget, keys)
        widget.observe(lambda change: self._changed(name, change["name"]), names=keys)
        self._send({"type": "part", "part": name, "state": self.state(name)}, [])

    def __contains__(self, name: str) -> bool:
        return name in self._parts

    def state(self, name: str, keys: Iterable[str] | None = None) -> dict:
        """Part ``name``'s traits as its front end takes them (JSON)."""
        widget, all_keys = self._parts[name]
        return widget.get_state(list(keys) if keys is not None else all_keys)

    def snapshot(self) -> dict:
        return {name: self.state(name) for name in self._parts}

    def receive(self, content: dict, buffers: list) -> None:
        """Takes one message of a front end (see the module's doc); anything else is refused, said in the log."""
        kind, name = content.get("type"), content.get("part")
        if kind == "hello":
            self._send({"type": "snapshot", "parts": self.snapshot()}, [])
        elif kind == "part" and isinstance(name, str) and name in self._parts:
            if "msg" in content:
                self._message(name, content["msg"], buffers)
            else:
                self._update(name, content.get("state"), content.get("client"))
        elif kind != "rpc":  # (the view's own requests are answered by RpcWidget)
            log.warning("a front-end message was refused: %s", clip(repr(content), 200))

    def _message(self, name: str, msg, buffers: list) -> None:
        widget, _ = self._parts[name]
        take = getattr(widget, "take_message", None)  # an RpcWidget; other parts take no messages
        if take is not None:
            take(msg, buffers, send=lambda c, b: self._send({"type": "part", "part": name, "msg": c}, b))

    def _update(self, name: str, state, client) -> None:
        widget, keys = self._parts[name]
        state = state if isinstance(state, dict) else {}
        client = client if isinstance(client, str) and len(client) <= MAX_CLIENT_CHARS else ""
        take = getattr(widget, "take_update", None)  # BrowserState: the part's own allow-list and checks
        self._taking = (name, client, state)
        try:
            refused = take(state) if take is not None else list(state)
        finally:
            self._taking = None
        back = [k for k in refused if k in keys]
        if back:  # the view shows what it sent: it is told what the kernel holds
            self._send({"type": "part", "part": name, "state": self.state(name, back)}, [])

    def _changed(self, name: str, key: str) -> None:
        value = self.state(name, [key])
        msg = {"type": "part", "part": name, "state": value}
        taking = self._taking
        # the browser's own value, taken: the view that sent it shows it already (another view still needs it)
        if taking and taking[0] == name and key in taking[2] and _same(taking[2][key], value[key]):
            msg["origin"] = taking[1]
        self._send(msg, [])


def _same(a, b) -> bool:
    try:
        return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    except (TypeError, ValueError):
        return False
