"""Semantic tokens from clangd under the legend kernel-lsp advertised.

The legend is part of the `initialize` answer, which goes out before clangd has started (clangd
starts in the background), so kernel-lsp advertises clangd 22's legend as it is. Another clangd
may answer with another legend: then each token's type and modifiers are mapped by name, tokens
of a type the advertised legend lacks are dropped, and delta requests are answered in full (a
delta's edits cut the encoded array anywhere, so they cannot be mapped).

clangd 22 does not serve `textDocument/semanticTokens/range` ("range": false); kernel-lsp serves
it from the full tokens, keeping those that lie in the range.
"""

from __future__ import annotations

from typing import Any

# clangd 22.1's legend, in its order (several of its kinds share one LSP type name).
TOKEN_TYPES = (
    "variable",
    "variable",
    "parameter",
    "function",
    "method",
    "function",
    "property",
    "variable",
    "class",
    "interface",
    "enum",
    "enumMember",
    "type",
    "type",
    "unknown",
    "namespace",
    "typeParameter",
    "concept",
    "type",
    "macro",
    "modifier",
    "operator",
    "bracket",
    "label",
    "comment",
)
TOKEN_MODIFIERS = (
    "declaration",
    "definition",
    "deprecated",
    "deduced",
    "readonly",
    "static",
    "abstract",
    "virtual",
    "dependentName",
    "defaultLibrary",
    "usedAsMutableReference",
    "usedAsMutablePointer",
    "constructorOrDestructor",
    "userDefined",
    "functionScope",
    "classScope",
    "fileScope",
    "globalScope",
)


class LegendMap:
    """clangd's legend → the advertised one. `identity` when they are the same."""

    def __init__(self, legend: dict | None) -> None:
        types = tuple((legend or {}).get("tokenTypes") or TOKEN_TYPES)
        modifiers = tuple((legend or {}).get("tokenModifiers") or TOKEN_MODIFIERS)
        self.identity = types == TOKEN_TYPES and modifiers == TOKEN_MODIFIERS
        self._types = [TOKEN_TYPES.index(t) if t in TOKEN_TYPES else None for t in types]
        self._modifier_bits = [
            (1 << TOKEN_MODIFIERS.index(m)) if m in TOKEN_MODIFIERS else 0 for m in modifiers
        ]

    def token_type(self, index: int) -> int | None:
        return self._types[index] if 0 <= index < len(self._types) else None

    def modifiers(self, bits: int) -> int:
        out, i = 0, 0
        while bits:
            if bits & 1 and i < len(self._modifier_bits):
                out |= self._modifier_bits[i]
            bits >>= 1
            i += 1
        return out


def decode(data: list[int]) -> list[tuple[int, int, int, int, int]]:
    """Relative encoding → (line, start, length, type, modifiers) with absolute positions."""
    out = []
    line = start = 0
    for i in range(0, len(data) - 4, 5):
        delta_line, delta_start, length, token_type, mods = data[i : i + 5]
        if delta_line:
            line += delta_line
            start = delta_start
        else:
            start += delta_start
        out.append((line, start, length, token_type, mods))
    return out


def encode(tokens: list[tuple[int, int, int, int, int]]) -> list[int]:
    data: list[int] = []
    prev_line = prev_start = 0
    for line, start, length, token_type, mods in tokens:
        data += [
            line - prev_line,
            start - prev_start if line == prev_line else start,
            length,
            token_type,
            mods,
        ]
        prev_line, prev_start = line, start
    return data


def remap(result: Any, legend: LegendMap) -> Any:
    """A full result (`{"data": [...]}`) under the advertised legend."""
    if legend.identity or not isinstance(result, dict) or not isinstance(result.get("data"), list):
        return result
    kept = []
    for line, start, length, token_type, mods in decode(result["data"]):
        mapped = legend.token_type(token_type)
        if mapped is not None:
            kept.append((line, start, length, mapped, legend.modifiers(mods)))
    out = dict(result, data=encode(kept))
    out.pop("resultId", None)  # a delta against it would be in clangd's legend
    return out


def in_range(result: Any, start: tuple[int, int], end: tuple[int, int]) -> Any:
    """The tokens of a full result that lie in [start, end) (line, character)."""
    if not isinstance(result, dict) or not isinstance(result.get("data"), list):
        return result
    kept = [t for t in decode(result["data"]) if start <= (t[0], t[1]) and (t[0], t[1] + t[2]) <= end]
    return {"data": encode(kept)}
