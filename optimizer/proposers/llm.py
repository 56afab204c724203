"""The LLM proposer: the `openai` client against any OpenAI-compatible endpoint (OpenAI, vLLM,
Ollama, llama.cpp). One chat request per candidate (servers that ignore `n` still give N answers),
`concurrency` of them at a time, each with its own hint so the candidates differ.

Retries: a 429 (rate limit), a 5xx or a dropped connection is retried with exponential backoff
(honouring Retry-After), up to `retries` times. A timeout is not retried: the model would most
likely be as slow again; the candidate is reported as a failed request.

The API key comes from the settings or OPENAI_API_KEY. It is passed to the client and nowhere
else: not in reprs, logs, reports or error messages (tests/integration/test_optimizer_llm.py checks).
"""

from __future__ import annotations

import logging
import os
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..extract import extract_candidate
from ..model import Proposal, Status
from ..prompts import round_prompt, system_prompt
from .base import Proposer, RoundContext

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LlmSettings:
    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    temperature: float = 0.7
    concurrency: int = 4
    timeout_s: float = 120.0
    retries: int = 4
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    max_tokens: int | None = None

    @classmethod
    def resolve(
        cls,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        **kw: Any,
    ) -> LlmSettings | None:
        """Settings from explicit values, else OPENAI_* environment variables; None when no model
        is configured (then the tuner is the proposer)."""
        model = model or os.environ.get("KERNEL_LSP_LLM_MODEL") or os.environ.get("OPENAI_MODEL")
        if not model:
            return None
        return cls(
            model=model,
            base_url=base_url or os.environ.get("OPENAI_BASE_URL") or None,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or None,
            **kw,
        )

    def public(self) -> dict[str, Any]:
        """What a report may show: everything but the key (only whether there is one)."""
        return {
            "model": self.model,
            "base_url": self.base_url,
            "api_key": "set" if self.api_key else "not set",
            "temperature": self.temperature,
            "concurrency": self.concurrency,
            "timeout_s": self.timeout_s,
            "retries": self.retries,
        }


def _retry_after(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or {}
    value = headers.get("retry-after") if hasattr(headers, "get") else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _summary(answer: str) -> str:
    """The first sentence of the prose after the last code block: what the model says it did."""
    prose = re.split(r"```+|~~~+", answer)[-1].strip() if "```" in answer or "~~~" in answer else ""
    prose = " ".join(prose.split())
    m = re.match(r"(.{1,160}?[.!?])(\s|$)", prose)
    return (m.group(1) if m else prose[:160]).strip()


class LlmProposer(Proposer):
    name = "llm"

    def __init__(self, settings: LlmSettings, client: Any = None, sleep: Any = time.sleep) -> None:
        self.config = settings
        self._client = client
        self._sleep = sleep
        self._lock = threading.Lock()
        self.requests = 0  # HTTP requests made (retries included)

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                from openai import OpenAI  # imported here: the GPU machine has no openai

                self._client = OpenAI(
                    api_key=self.config.api_key or "none",  # local servers accept any key
                    base_url=self.config.base_url,
                    timeout=self.config.timeout_s,
                    max_retries=0,  # retries are ours (backoff, logging without secrets)
                )
            return self._client

    def settings(self) -> dict[str, object]:
        return {"proposer": self.name, **self.config.public()}

    def propose(self, ctx: RoundContext) -> list[Proposal]:
        prompts = [
            round_prompt(ctx.features, ctx.best, ctx.round, i, ctx.count, ctx.last_round)
            for i in range(1, ctx.count + 1)
        ]
        with ThreadPoolExecutor(max_workers=max(1, min(self.config.concurrency, len(prompts)))) as pool:
            return list(pool.map(lambda p: self._one(p, ctx), prompts))

    def _one(self, prompt: str, ctx: RoundContext) -> Proposal:
        import openai

        client = self._get_client()
        entry = ctx.features.spec.entry if ctx.features.spec.is_entry else None
        messages = [
            {"role": "system", "content": system_prompt(entry=entry is not None)},
            {"role": "user", "content": prompt},
        ]
        attempt = 0
        while True:
            if ctx.cancel.is_set():
                return Proposal(self.name, None, failure=Status.REQUEST_FAILED, detail="cancelled")
            with self._lock:
                self.requests += 1
            try:
                kwargs: dict[str, Any] = {
                    "model": self.config.model,
                    "messages": messages,
                    "temperature": self.config.temperature,
                }
                if self.config.max_tokens:
                    kwargs["max_tokens"] = self.config.max_tokens
                response = client.chat.completions.create(**kwargs)
                answer = (response.choices[0].message.content or "") if response.choices else ""
                break
            except openai.APITimeoutError:
                log.warning("LLM request timed out after %.0f s", self.config.timeout_s)
                return Proposal(
                    self.name,
                    None,
                    failure=Status.REQUEST_FAILED,
                    detail=f"timeout: no answer within {self.config.timeout_s:g} s",
                )
            except (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError) as e:
                status = getattr(e, "status_code", None)
                what = f"HTTP {status}" if status else type(e).__name__
                if attempt >= self.config.retries:
                    return Proposal(
                        self.name,
                        None,
                        failure=Status.REQUEST_FAILED,
                        detail=f"{what} after {attempt + 1} attempts",
                    )
                wait = _retry_after(e)
                if wait is None:
                    wait = min(self.config.max_backoff_s, self.config.backoff_s * 2**attempt)
                    wait *= 0.5 + random.random() / 2  # jitter, so parallel requests spread out
                log.info("LLM request: %s; retry %d in %.2f s", what, attempt + 1, wait)
                attempt += 1
                self._sleep(wait)
            except openai.APIStatusError as e:
                return Proposal(
                    self.name,
                    None,
                    failure=Status.REQUEST_FAILED,
                    detail=f"HTTP {e.status_code}: {_safe_error(e)}",
                )
        best_source = ctx.best.source or ctx.features.source
        extracted = extract_candidate(answer, best_source, ctx.features.kernels, entry=entry)
        if extracted.source is None:
            return Proposal(self.name, None, failure=Status.NO_CODE, detail=extracted.message, answer=answer)
        note = _summary(answer)
        if attempt:
            note = (note + f" (after {attempt} retr{'y' if attempt == 1 else 'ies'})").strip()
        return Proposal(self.name, extracted.source, note=note, detail=extracted.message, answer=answer)


def _safe_error(e: Any) -> str:
    """The server's error message, without anything that could echo request headers."""
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        msg = (
            body.get("message") or (body.get("error") or {}).get("message")
            if isinstance(body.get("error"), dict)
            else body.get("message")
        )
        if msg:
            return str(msg)[:300]
    return type(e).__name__
