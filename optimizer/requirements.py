"""What an FSR run needs that is missing here, and how to get each: the one message the CLI's
`optimize` and the editor's optimize action give when a run cannot start for want of a GPU (and,
where the LLM would propose, of a model or an API key)."""

from __future__ import annotations

import os

from ..config import Settings
from .proposers.llm import LlmSettings

GET_A_GPU = (
    "FSR verifies and times every candidate on a GPU, so nothing was run: run it on a machine with "
    "an NVIDIA GPU and its driver (nvidia-smi lists it), or on a Ray cluster's GPUs "
    "(--backend ray --ray-address HOST:PORT; the evaluation.backend and cluster.address settings)"
)
GET_A_MODEL = (
    "set a model (--model, the llm.model setting or OPENAI_MODEL) and an API key (OPENAI_API_KEY; "
    "in VS Code the command kernel-lsp: Set LLM API Key)"
)


def llm_gap(settings: Settings, proposer: str | None = None) -> str:
    """What the LLM proposer lacks ("" when it has what it needs, or will not be used)."""
    kind = proposer or settings.optimizer_proposer or "auto"
    if kind == "tune":
        return ""
    llm = LlmSettings.resolve(settings.llm_model, settings.llm_base_url, settings.llm_api_key)
    if llm is None:
        return (
            f"No LLM is configured either: {GET_A_MODEL}; without one the built-in tuner proposes "
            "candidates (--proposer tune)"
        )
    if not llm.api_key and not (llm.base_url or os.environ.get("OPENAI_BASE_URL")):
        return "The LLM has no API key: set OPENAI_API_KEY (in VS Code: kernel-lsp: Set LLM API Key)"
    return ""


def fsr_cannot_run(no_gpu: str, settings: Settings, proposer: str | None = None) -> str:
    """`no_gpu`: `no_gpu_message`'s words (`no GPU: ...`). Then how to get a GPU, and what the
    LLM lacks when it would propose."""
    text = f"{no_gpu}. {GET_A_GPU}."
    gap = llm_gap(settings, proposer)
    return f"{text} {gap}." if gap else text
