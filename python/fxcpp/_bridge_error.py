"""FxcppError, the one error of python/fxcpp_bridge.py (fxcpp.bridge), which re-exports it; its parts
python/fxcpp/_bridge_*.py raise it too."""


class FxcppError(Exception):
    """A file that cannot be read, or a module that cannot be written."""
