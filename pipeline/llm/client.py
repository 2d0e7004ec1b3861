"""The model client: how to call the model (``LLMClient``, ``open_client``) and one transport
retry policy. Which model to call is ``pipeline/llm/choice.py`` (``resolve_model``).

litellm is imported lazily (``distill --help``, extract and render never pay its ~4 s import),
and only after ``LITELLM_LOCAL_MODEL_COST_MAP=True`` so the import does no network I/O.

Retries: instructor's own loop re-asks on validation errors only. Transport failures are retried
here, once, with exponential backoff and jitter, and only for the named transient types. A 4xx
is never retried. A VCR cassette miss surfaces as ``APIConnectionError``: tests pass
``num_retries=0`` so a miss fails at once instead of being retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from pipeline.config import Settings
from pipeline.errors import DistillError

# NO_KEY and _key_for_model are not used here: evals/llm_adapter.py imports them from this module.
from pipeline.llm.choice import NO_KEY, ModelChoice, _key_for_model, resolve_model  # noqa: F401

if TYPE_CHECKING:
    from pipeline.models import RunReport

T = TypeVar("T", bound=BaseModel)

log = logging.getLogger(__name__)


class LLMError(DistillError):
    """The model could not be configured or called."""


class BudgetExceeded(LLMError):
    """The next call would pass --max-cost or --max-tokens; nothing more is sent."""


# --------------------------------------------------------------------------- litellm, lazily


def _litellm():  # type: ignore[no-untyped-def]
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


def _retryable_types() -> tuple[type[BaseException], ...]:
    lt = _litellm()
    return (
        lt.RateLimitError,
        lt.Timeout,
        lt.APIConnectionError,
        lt.InternalServerError,
        lt.ServiceUnavailableError,
        lt.BadGatewayError,
    )


def _never_types() -> tuple[type[BaseException], ...]:
    lt = _litellm()
    return (
        lt.BadRequestError,  # includes ContextWindowExceeded, ContentPolicyViolation
        lt.AuthenticationError,
        lt.PermissionDeniedError,
        lt.NotFoundError,
        lt.UnprocessableEntityError,
    )


def is_retryable(exc: BaseException) -> bool:
    """Rate limits, timeouts, connection errors and 5xx: yes. Any other 4xx: never."""
    if isinstance(exc, _never_types()):
        return False
    if isinstance(exc, _retryable_types()):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in (408, 429) or status >= 500)


def retry_policy(num_retries: int, *, wait: Any = None):  # type: ignore[no-untyped-def]
    """The one transport policy: ``num_retries`` retries of retryable errors, backoff + jitter."""
    from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential

    return AsyncRetrying(
        retry=retry_if_exception(is_retryable),
        stop=stop_after_attempt(num_retries + 1),
        wait=wait if wait is not None else wait_random_exponential(multiplier=1, max=30),
        reraise=True,
    )


# --------------------------------------------------------------------------- client


@dataclass
class Usage:
    calls: int = 0
    #: ``structured`` requests; every call beyond one per request was a re-ask
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0


class LLMClient:
    """Structured calls through instructor + litellm, with budgets and usage accounting.

    One event loop lives as long as the client, so litellm's cached async HTTP clients stay
    valid across sessions (``asyncio.run`` per session would close the loop under them).
    """

    def __init__(
        self,
        choice: ModelChoice,
        *,
        num_retries: int = 3,
        max_reasks: int = 2,
        timeout: float = 600.0,
        max_cost: float | None = None,
        max_tokens: int | None = None,
        retry_wait: Any = None,
        temperature: float = 0.0,
        concurrency: int | None = None,
    ) -> None:
        self.choice = choice
        self.num_retries = num_retries
        self.max_reasks = max_reasks
        self.timeout = timeout
        self.max_cost = max_cost
        self.max_tokens = max_tokens
        self.retry_wait = retry_wait
        self.temperature = temperature
        self.usage = Usage()
        self.exhausted = False
        self._reserved_tokens = 0
        self._reserved_cost = 0.0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._instructor: Any = None
        #: The cap on calls in flight across every session of a run (``--jobs``); made on the
        #: client's loop at the first call, because a semaphore binds to the loop it is used on.
        self.concurrency = concurrency
        self._slots: asyncio.Semaphore | None = None
        #: Say each call as it starts and ends (logger ``pipeline.llm.client``): on the embedded
        #: model a call takes minutes on 2 cores, and a run must not sit silent that long.
        self.progress = choice.embedded

    @property
    def model(self) -> str:
        return self.choice.model

    # -- budget -------------------------------------------------------------------------

    def _estimate_cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        try:
            p, c = _litellm().cost_per_token(
                model=self.model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
            )
            return float(p + c)
        except Exception:  # unknown model (local, custom endpoint): no price known
            return 0.0

    def _reserve(self, prompt_tokens: int, max_out: int) -> tuple[int, float]:
        tokens = prompt_tokens + max_out
        cost = self._estimate_cost(prompt_tokens, max_out) if self.max_cost is not None else 0.0
        with self._lock:
            spent = self.usage.input_tokens + self.usage.output_tokens + self._reserved_tokens
            if self.max_tokens is not None and spent + tokens > self.max_tokens:
                self.exhausted = True
                raise BudgetExceeded(
                    f"--max-tokens {self.max_tokens} reached ({spent} used); stopping LLM calls"
                )
            if self.max_cost is not None and self.usage.cost_usd + self._reserved_cost + cost > self.max_cost:
                self.exhausted = True
                raise BudgetExceeded(
                    f"--max-cost ${self.max_cost:.4f} reached (${self.usage.cost_usd:.4f} spent); stopping LLM calls"
                )
            self._reserved_tokens += tokens
            self._reserved_cost += cost
        return tokens, cost

    # -- transport ----------------------------------------------------------------------

    async def _acompletion(self, **kwargs: Any) -> Any:
        """What instructor calls: litellm.acompletion + budget + usage + the retry policy."""
        lt = _litellm()
        kwargs.setdefault("temperature", self.temperature)
        kwargs["num_retries"] = 0  # one retry policy: ours (not litellm's, not the openai SDK's)
        kwargs["max_retries"] = 0
        kwargs.setdefault("timeout", self.timeout)
        if self.choice.api_base:
            kwargs["api_base"] = self.choice.api_base
        if self.choice.api_key:
            kwargs["api_key"] = self.choice.api_key
        if self._slots is None and self.concurrency:
            self._slots = asyncio.Semaphore(self.concurrency)
        # The slot comes before the budget reservation: a queued call must not hold budget.
        async with self._slots or contextlib.nullcontext():
            prompt_chars = sum(len(str(m.get("content") or "")) for m in kwargs.get("messages", []))
            tokens, cost = self._reserve(prompt_chars // 3 + 200, int(kwargs.get("max_tokens") or 1024))
            started = time.monotonic()
            if self.progress:
                log.info("  model call: about %s tokens in…", f"{prompt_chars // 3:,}")
            try:
                async for attempt in retry_policy(self.num_retries, wait=self.retry_wait):
                    with attempt:
                        resp = await lt.acompletion(model=self.model, **kwargs)
            finally:
                with self._lock:
                    self._reserved_tokens -= tokens
                    self._reserved_cost -= cost
        self._account(resp)
        if self.progress:
            usage = getattr(resp, "usage", None)
            log.info("  model call done in %.0f s (%s tokens in, %s out)", time.monotonic() - started,
                     getattr(usage, "prompt_tokens", "?"), getattr(usage, "completion_tokens", "?"))
        return resp

    def _account(self, resp: Any) -> None:
        usage = getattr(resp, "usage", None)
        try:
            cost = float(_litellm().completion_cost(completion_response=resp) or 0.0)
        except Exception:  # no price for this model
            cost = 0.0
        with self._lock:
            self.usage.calls += 1
            self.usage.input_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
            self.usage.output_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
            self.usage.cost_usd += cost

    # -- structured calls -----------------------------------------------------------------

    async def structured(self, response_model: type[T], system: str, user: str, *, max_tokens: int) -> T:
        """One validated object. Validation errors are re-asked up to ``max_reasks`` times."""
        if self.exhausted:
            raise BudgetExceeded("LLM budget already exhausted")
        if self._instructor is None:
            import instructor

            self._instructor = instructor.from_litellm(self._acompletion, mode=instructor.Mode.TOOLS)
        with self._lock:
            self.usage.requests += 1
        # No ``context=``: the prompt is rendered already (see pipeline/summarize/prompts.py).
        return await self._instructor.chat.completions.create(
            response_model=response_model,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            max_retries=self.max_reasks,
            max_tokens=max_tokens,
        )

    def run(self, coro: Any) -> Any:
        """Run a coroutine on the client's own loop (for synchronous callers)."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coro)

    def close(self) -> None:
        """Shut the loop down properly: litellm leaves a logging-worker task waiting on a queue, and
        a loop closed under a pending task leaves a coroutine that CPython 3.11 can crash on when it
        is garbage-collected later (seen as a segfault at interpreter exit)."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                _finish(loop, asyncio.gather(*pending, return_exceptions=True))
            _finish(loop, loop.shutdown_asyncgens())
            # litellm runs part of each call in the loop's default executor; as asyncio.run does,
            # join those threads here rather than leave them to interpreter shutdown.
            _finish(loop, loop.shutdown_default_executor())
        finally:
            loop.close()

    def report_into(self, report: RunReport) -> None:
        report.llm_calls = self.usage.calls
        report.llm_reasks = max(0, self.usage.calls - self.usage.requests)
        report.input_tokens = self.usage.input_tokens
        report.output_tokens = self.usage.output_tokens
        report.cost_usd = round(self.usage.cost_usd, 6)


def _finish(loop: asyncio.AbstractEventLoop, awaitable: Any) -> None:
    """``loop.run_until_complete`` that survives a Ctrl-C that landed mid-call: the interrupted run leaves
    the loop flagged to stop, so the first run after it ends at once ("Event loop stopped before Future
    completed"); the second finishes the work. Without this, Ctrl-C during a model call printed a
    traceback and exited 1 instead of the "Interrupted: ..." report."""
    future = asyncio.ensure_future(awaitable, loop=loop)
    for attempt in range(2):
        try:
            loop.run_until_complete(future)
            return
        except RuntimeError as exc:
            if "stopped before" not in str(exc) or attempt:
                raise


@contextmanager
def open_client(
    settings: Settings,
    report: RunReport | None = None,
    *,
    env: dict[str, str] | None = None,
    num_retries: int | None = None,
    **client_kwargs: Any,
) -> Iterator[LLMClient | None]:
    """Yield a ready client (starting the embedded server if that is the model), or None.

    None means "no usable model": a notice is added to ``report`` once, and the caller uses the
    extractive summariser. The embedded server is stopped on exit, including on Ctrl-C.
    """
    notes: list[str] = []
    choice = resolve_model(settings, env, notes)

    def notice(text: str) -> None:
        if report is not None and text not in report.notices:
            report.notices.append(text)

    if choice is None:
        notice(
            "extractive summaries: " + ("; ".join(notes) or "no model")
        )
        yield None
        return
    for n in notes:
        notice(n)
    kwargs = {
        "num_retries": settings.llm_retries if num_retries is None else num_retries,
        "timeout": settings.llm_timeout,
        "max_cost": settings.max_cost,
        "max_tokens": settings.max_tokens,
        **client_kwargs,
    }
    server = None
    if choice.embedded:
        from pipeline.llm import local as localmodel

        try:
            server = localmodel.LocalServer(choice.gguf)
            server.start()
        except localmodel.LocalModelError as e:
            notice(f"embedded model unavailable: {e}. Using extractive summaries.")
            yield None
            return
        choice = replace(choice, api_base=server.api_base)
    client = LLMClient(choice, **kwargs)
    try:
        yield client
    finally:
        if report is not None:
            client.report_into(report)
        client.close()
        if server is not None:
            server.stop()
