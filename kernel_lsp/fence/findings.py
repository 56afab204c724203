"""What the fence reports: one plain finding per reason a candidate's host code may not run."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    """`kind`: include, asm, attribute, pragma, macro, call, symbol, constructor, instruction,
    object (the object could not be read). `line`: 1-based in the candidate (0: not known)."""

    kind: str
    message: str
    line: int = 0
    symbol: str = ""

    def describe(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "message": self.message, "line": self.line, "symbol": self.symbol}
