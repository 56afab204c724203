"""A scripted LLM for optimizer tests: a stand-in for the `openai` client that LlmProposer takes
(`LlmProposer(settings, client=...)`), answering each request from a script keyed by (round,
candidate) as the prompt states them ("candidate I of N in round R"), and keeping every request
for the test to read. The prompt building, extraction and everything after it are the real ones.

`rewrite(name)` reads an LLM-style answer from tests/fixtures/entry_rewrites/ (prose around a
fenced file, as models answer)."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from types import SimpleNamespace

from kernel_lsp.optimizer.proposers.llm import LlmProposer, LlmSettings

REWRITES = Path(__file__).resolve().parent / "fixtures" / "entry_rewrites"


def rewrite(name: str) -> str:
    return (REWRITES / f"{name}.md").read_text()


class ScriptedClient:
    def __init__(self, script: dict[tuple[int, int], str], default: str = "I have nothing to add.") -> None:
        self.script = script
        self.default = default
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))

    def _create(self, model: str, messages: list[dict], **kwargs) -> SimpleNamespace:
        user = messages[-1]["content"]
        m = re.search(r"candidate (\d+) of (\d+) in round (\d+)", user)
        key = (int(m.group(3)), int(m.group(1))) if m else (0, 0)
        with self._lock:
            self.requests.append({"key": key, "system": messages[0]["content"], "user": user})
        answer = self.script.get(key, self.default)
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=answer))])


def scripted_proposer(script: dict[tuple[int, int], str]) -> tuple[LlmProposer, ScriptedClient]:
    client = ScriptedClient(script)
    settings = LlmSettings(model="scripted-coder", concurrency=1, retries=0)
    return LlmProposer(settings, client=client), client


def scripted_round(session, path: str, kernel: str, answers: list[str], workspace: str):
    """One optimize round on `path` (its spec beside it) through the real session, the scripted
    model giving `answers` (LLM-style texts) as round 1's candidates in order: every gate real,
    no cache, no report written. Returns the run's result."""
    from kernel_lsp.optimizer.session import RunRequest, run

    proposer, _ = scripted_proposer({(1, i): a for i, a in enumerate(answers, 1)})
    request = RunRequest(
        path=path,
        kernel=kernel,
        rounds=1,
        candidates=len(answers),
        use_cache=False,
        workspace=workspace,
        write_report=False,
    )
    return run(request, session=session, proposer=proposer)
