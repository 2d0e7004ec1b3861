"""The LLM side of the eval: the LLM summariser and the LLM judge, both behind VCR cassettes.

Everything goes through the pipeline's own client (``pipeline.llm.client.LLMClient``: instructor +
litellm, Mode.TOOLS, temperature 0) and summariser (``pipeline.summarize.mapreduce.summarise_llm``), so the
eval measures exactly what ``distill --summarizer llm`` ships. The only eval-specific parts are:

* **Cassettes.** One per (summariser, session) and one per (judge, summariser, session), under
  ``evals/cassettes/``. Replay is the default: record mode ``none``, matching on method, URL and
  *body*, so any change to a prompt, the chunker or the model string is a miss, and a miss fails
  the run loudly (``CassetteMiss``) instead of quietly falling back to the extractive summary the
  way production does. ``--record`` re-records against the configured model.
* **No cache.** ``SummaryCache`` is bypassed so every call is a cassette interaction.
* **meta.json** beside each model's cassettes names the model, endpoint and recording time;
  replay rebuilds the client from it (the body match includes the model string).

Importing this module does not import litellm; it is imported on first use.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from evals.dataset import GoldDecision
from pipeline.models import Chunk, Facts, RunReport, Session, SessionSummary

CASSETTES = Path(__file__).resolve().parent / "cassettes"
PROMPTS = Path(__file__).resolve().parent / "prompts"
FILTER_HEADERS = ["authorization", "api-key", "x-api-key", "openai-organization", "openai-project", "cookie"]
#: Signs that a request found no cassette entry (vcr's error arrives wrapped by openai/litellm).
_MISS = re.compile(r"CannotOverwriteExistingCassette|Connection error|APIConnectionError", re.I)


class CassetteMiss(RuntimeError):
    """A replayed run made a request the cassette does not hold, or left recorded ones unplayed."""


def slug(model: str) -> str:
    """A directory-safe name for a model string: ``openai/qwen2.5-coder`` -> ``openai--qwen2.5-coder``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model.replace("/", "--")).strip("-")


# --------------------------------------------------------------------------- cassettes


def _scrub_response(response: dict[str, Any]) -> dict[str, Any]:
    headers = response.get("headers") or {}
    for h in list(headers):
        if h.lower() in ("date", "server", "set-cookie", "x-request-id", "openai-organization"):
            headers.pop(h)
    return response


@contextmanager
def cassette(path: Path, *, record: bool) -> Iterator[Any]:
    """A vcrpy cassette at ``path``: replay-only unless ``record`` (then rewritten from scratch)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the cost-map fetch would be a miss
    import vcr

    recorder = vcr.VCR(
        record_mode="all" if record else "none",
        match_on=["method", "scheme", "host", "port", "path", "query", "body"],
        filter_headers=FILTER_HEADERS,
        before_record_response=_scrub_response,
        decode_compressed_response=True,
    )
    if record:
        path.unlink(missing_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
    with recorder.use_cassette(str(path)) as cas:
        yield cas


def _check_played(cas: Any, what: str, notices: list[str]) -> None:
    missed = [n for n in notices if _MISS.search(n)]
    if missed:
        raise CassetteMiss(f"{what}: request not in cassette ({missed[0][:300]}); re-record with --record")
    if not cas.all_played:
        raise CassetteMiss(f"{what}: {len(cas.data) - cas.play_count} recorded interactions were not replayed; "
                           "the pipeline now sends different requests; re-record with --record")


# --------------------------------------------------------------------------- model metadata


@dataclass
class ModelMeta:
    """How a model's cassettes were recorded (``evals/cassettes/<slug>/meta.json``)."""

    model: str
    api_base: str | None
    recorded_at: str = ""
    sessions: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    note: str = ""

    @classmethod
    def load(cls, directory: Path) -> ModelMeta | None:
        try:
            return cls(**json.loads((directory / "meta.json").read_text("utf-8")))
        except (OSError, ValueError, TypeError):
            return None

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.recorded_at = datetime.now(UTC).isoformat(timespec="seconds")
        (directory / "meta.json").write_text(json.dumps(self.__dict__, indent=2, ensure_ascii=False) + "\n", "utf-8")


def recorded_models() -> list[ModelMeta]:
    """Every LLM summariser with cassettes, in directory order."""
    out = []
    for d in sorted(p for p in (CASSETTES / "summaries").glob("*") if p.is_dir()):
        if meta := ModelMeta.load(d):
            out.append(meta)
    return out


def make_client(model: str, api_base: str | None, *, record: bool) -> Any:
    """An ``LLMClient`` for replay (placeholder key, no retries) or recording (key from the env)."""
    from pipeline.config import hermes_home
    from pipeline.llm.client import NO_KEY, LLMClient, ModelChoice, _key_for_model

    key = _key_for_model(model, dict(os.environ), hermes_home()) if record else None
    choice = ModelChoice(model, "eval", api_base=api_base, api_key=key or NO_KEY)
    # num_retries=0: a retry would hide a cassette miss (and recording wants the first answer).
    return LLMClient(choice, num_retries=0, timeout=1800.0)


# --------------------------------------------------------------------------- the summariser


class LLMSummariser:
    """``pipeline.summarize.mapreduce.summarise_llm`` for one model, one cassette per session."""

    def __init__(self, model: str, api_base: str | None, *, record: bool, chunk_tokens: int | None = None) -> None:
        from pipeline.config import build_settings

        self.model, self.api_base, self.record = model, api_base, record
        self.dir = CASSETTES / "summaries" / slug(model)
        self.meta = ModelMeta.load(self.dir) or ModelMeta(model=model, api_base=api_base)
        fields: dict[str, Any] = {"summarizer": "llm", "model": model, "api_base": api_base, "jobs": 1}
        if chunk_tokens:
            fields["chunk_tokens"] = chunk_tokens
        self.settings = build_settings(**fields)
        self.client = make_client(model, api_base, record=record)

    @property
    def name(self) -> str:
        return f"llm:{self.model}"

    def has(self, case_id: str) -> bool:
        return self.record or (self.dir / f"{case_id}.yaml").exists()

    def __call__(self, case_id: str, session: Session, chunks: list[Chunk], facts: Facts) -> tuple[SessionSummary, dict[str, Any]]:
        from pipeline.summarize.mapreduce import summarise_llm

        report = RunReport(summarizer=self.name)
        before = (self.client.usage.calls, self.client.usage.input_tokens, self.client.usage.output_tokens,
                  self.client.usage.cost_usd)
        with cassette(self.dir / f"{case_id}.yaml", record=self.record) as cas:
            summary = summarise_llm(session, chunks, facts, self.settings, self.client, None, report)
            if not self.record:
                _check_played(cas, f"{self.name} / {case_id}", report.notices)
        u = self.client.usage
        usage = {"llm_calls": u.calls - before[0], "input_tokens": u.input_tokens - before[1],
                 "output_tokens": u.output_tokens - before[2], "cost_usd": round(u.cost_usd - before[3], 6),
                 "fallback": report.fallbacks > 0, "hallucinations_dropped": report.hallucinations_dropped,
                 "notices": list(report.notices)}
        if self.record and case_id not in self.meta.sessions:
            self.meta.sessions.append(case_id)
        return summary, usage

    def finish(self) -> None:
        if self.record:
            self.meta.api_base = self.api_base
            self.meta.save(self.dir)
        self.client.close()


# --------------------------------------------------------------------------- the judge


class Verdict(BaseModel):
    """Whether the summary states the decision."""

    found: bool = Field(description="true only if the summary states this decision (the same choice).")
    quote: str = Field("", description="When found: the phrase from the summary that states it, copied exactly.")


def _judge_prompt() -> Any:
    import hashlib

    from pipeline.summarize.prompts import Prompt

    source = (PROMPTS / "judge.j2").read_text("utf-8")
    version = int(re.match(r"\A\s*\{#\s*version:\s*(\d+)", source).group(1))  # type: ignore[union-attr]
    return Prompt(name="judge", version=version, source=source, sha256=hashlib.sha256(source.encode()).hexdigest())


def _norm(text: str) -> str:
    return re.sub(r"[\W_]+", "", text.casefold())


class LLMJudge:
    """Decision judge backed by a model, replayed from ``evals/cassettes/judge/<model>/<summariser>/``.

    A verdict counts as "found" only when the model says so *and* its quote occurs in the summary
    (alphanumerics only, case-insensitive): a small judge model that claims a match it cannot
    point to is overruled. Sessions without a judge cassette use the keyword judge, and the
    report says which judge decided each session.
    """

    def __init__(self, model: str, api_base: str | None, *, record: bool) -> None:
        self.model, self.api_base, self.record = model, api_base, record
        self.dir = CASSETTES / "judge" / slug(model)
        self.client = make_client(model, api_base, record=record)
        self.prompt = _judge_prompt()
        self.meta = ModelMeta.load(self.dir) or ModelMeta(model=model, api_base=api_base)

    def path(self, summariser: str, case_id: str) -> Path:
        return self.dir / slug(summariser) / f"{case_id}.yaml"

    def has(self, summariser: str, case_id: str) -> bool:
        return self.record or self.path(summariser, case_id).exists()

    def judge_all(self, summariser: str, case_id: str, decisions: list[GoldDecision], text: str) -> list[bool]:
        from pipeline.llm.client import LLMError

        hits: list[bool] = []
        with cassette(self.path(summariser, case_id), record=self.record) as cas:
            for d in decisions:
                system, user = self.prompt.render(decision=d.text, summary=text)
                try:
                    v = self.client.run(self.client.structured(Verdict, system, user, max_tokens=256))
                except LLMError:
                    raise
                except Exception as exc:
                    if not self.record and _MISS.search(f"{type(exc).__name__}: {exc}"):
                        raise CassetteMiss(f"judge {self.model} / {summariser} / {case_id}: {exc}") from exc
                    raise
                hits.append(bool(v.found and v.quote.strip() and _norm(v.quote) in _norm(text)))
            if not self.record:
                _check_played(cas, f"judge {self.model} / {summariser} / {case_id}", [])
        key = f"{slug(summariser)}/{case_id}"
        if self.record and key not in self.meta.sessions:
            self.meta.sessions.append(key)
        return hits

    def finish(self) -> None:
        if self.record:
            self.meta.save(self.dir)
        self.client.close()
