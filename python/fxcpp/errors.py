"""fxcpp.FxError: what fx::Error becomes in Python (src/python/errors.cpp raises it)."""
import re

from . import bridge

_NODE = re.compile(r"%([A-Za-z_][A-Za-z0-9_]*)|node '([^']+)'")


class FxError(RuntimeError, bridge.FxcppError):
    """An fxcpp error (C++ fx::Error, or a module fxcpp cannot map); `node` names the node when the message does."""

    def __init__(self, message, node=None):
        super().__init__(message)
        if node is None:
            m = _NODE.search(message)
            node = (m.group(1) or m.group(2)) if m else None
        self.node = node
