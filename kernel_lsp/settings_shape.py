"""The shape of an editor's settings object, read without the engine: the server's first
answers (early_initialize, clangd's start) need two settings before the settings module and its
compiler imports are loaded."""

from __future__ import annotations

from collections.abc import Container


def flatten_settings(raw: object, leaves: Container[str] = ()) -> dict[str, object]:
    """A settings object (camelCase, nested or dotted, with or without a `kernelLsp` wrapper) as
    dotted keys without the `kernelLsp.` prefix. A dict under a name in `leaves` stays whole: it
    is a wrong type where a leaf setting belongs, and its message must name that setting."""
    if not isinstance(raw, dict):
        return {}
    top: dict = raw["kernelLsp"] if isinstance(raw.get("kernelLsp"), dict) else raw
    out: dict[str, object] = {}

    def walk(d: dict, prefix: str) -> None:
        for key, value in d.items():
            dotted = f"{prefix}{key}"
            name = dotted.removeprefix("kernelLsp.")
            if isinstance(value, dict) and not dotted.startswith("_") and name not in leaves:
                walk(value, dotted + ".")
            else:
                out[name] = value

    walk(top, "")
    return out
