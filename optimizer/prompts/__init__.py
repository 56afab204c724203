"""The LLM prompts: Markdown templates in this folder, filled with `string.Template`
(`$name` placeholders; a literal dollar is `$$`). Kept out of the code so they can be read and
edited as text."""

from __future__ import annotations

import functools
from importlib import resources
from string import Template

from ..features import Features
from ..model import Outcome, Status

MAX_FEEDBACK_CHARS = 1500  # per failed candidate: enough for a compile log or a mismatch report


@functools.cache
def template(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def hints() -> list[str]:
    return [line.strip() for line in template("hints.md").splitlines() if line.strip()]


def system_prompt(entry: bool = False) -> str:
    """The rules: for a kernel spec, keep the kernels' names and parameters (the harness launches
    them); for an entry spec, anything in the file may change but the entry's signature, and the
    fence's rules in words."""
    return template("system_entry.md" if entry else "system.md").strip()


def _clip(text: str, limit: int = MAX_FEEDBACK_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + " [...]"


def feedback_items(outcomes: list[Outcome]) -> str:
    """One bullet per candidate of the last round: its fate, with the compiler log or the
    mismatch report of the failed ones, and the figures of the correct ones."""
    items = []
    for o in outcomes:
        if o.status is Status.CORRECT and o.figures:
            speed = f", {o.speedup:.2f}x the original" if o.speedup else ""
            items.append(
                f"- {o.id} ({o.note or 'candidate'}): correct, {o.figures.latency_s * 1e6:.2f} us{speed}"
            )
        elif o.status is Status.DUPLICATE:
            items.append(f"- {o.id}: identical to an earlier candidate")
        else:
            detail = _clip(o.message) if o.message else ""
            block = f"\n  ```\n  {detail.replace(chr(10), chr(10) + '  ')}\n  ```" if detail else ""
            items.append(f"- {o.id}: {o.status.label}{block}")
    return "\n".join(items)


def round_prompt(
    features: Features,
    best: Outcome,
    round_no: int,
    index: int,
    count: int,
    last_round: list[Outcome] | None = None,
) -> str:
    """The user message for candidate `index` (1-based) of `count` in round `round_no`."""
    hint_list = hints()
    hint = hint_list[(index - 1 + (round_no - 1) * count) % len(hint_list)] if hint_list else ""
    sections = features.sections()
    label = f"{best.id}, {best.figures.latency_s * 1000000.0:.2f} us" if best.figures else best.id
    feedback = ""
    if last_round:
        feedback = Template(template("feedback.md")).safe_substitute(
            items=feedback_items(last_round), best_label=label
        )
    return (
        Template(template("round.md"))
        .safe_substitute(
            index=index,
            count=count,
            round=round_no,
            hint=f"consider to {hint}." if hint else "",
            task=(
                f"Optimize the file below: its entry `{features.spec.entry}` and the kernels it launches."
                if features.spec.is_entry
                else "Optimize the kernel below."
            ),
            features=features.render().rstrip(),
            best_label=label,
            best_source=(best.source or sections["source"]).rstrip(),
            feedback=feedback,
        )
        .rstrip()
        + "\n"
    )
