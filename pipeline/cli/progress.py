"""What ``distill`` shows while it works: each note as it is written and, on a run that calls a model,
the plan up front and progress per session.

A model run can take hours (the embedded model: one to several minutes a session on 2 cores), so
before the first call it says how many sessions need a summary, how long that should take (the
last run's rate, or after the first session) and how to go faster; then a rich progress bar on a
terminal, or one plain line per session when stderr is a file or a pipe (cron, a log): sessions
done and left, the time per session, the time left. Ctrl-C ends the run with a line saying what is
kept (``interrupted``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from pipeline.cli.record import duration, result_lines

if TYPE_CHECKING:
    from pipeline.models import SessionResult
    from pipeline.run.window import Plan

#: Shown to whoever waits on the embedded model: the ways to go faster.
FASTER = ("Faster: a hosted model (--model openrouter/google/gemini-2.5-flash, or model: in "
          "$HERMES_HOME/distill.yaml) or --summarizer extractive (no model, seconds); --limit N does the N newest.")


def model_label(model: str, local: bool) -> str:
    return f"the local model {model.split('/', 1)[-1]} (llama.cpp on this machine)" if local else model


class RunWatch:
    """The ``on_result`` / ``on_plan`` callbacks of one run, and what they printed."""

    def __init__(self, *, quiet: bool, err: TextIO | None = None, out: TextIO | None = None,
                 tty: bool | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.quiet = quiet
        self.err, self.out = err or sys.stderr, out or sys.stdout
        self.tty = self.err.isatty() if tty is None else tty
        self.clock = clock
        self.written = 0
        self._pending: set[str] = set()
        self._total = self._done = 0
        self._started = 0.0
        self._first_done: float | None = None  # when the first session finished: the warm-up's end
        self._last_done = 0.0
        self._estimate: float | None = None  # seconds per session, before this run has measured one
        self._bar: Any = None
        self._task: Any = None

    # -- callbacks ---------------------------------------------------------------------

    def plan(self, plan: Plan) -> None:
        self._pending, self._total = set(plan.pending), len(plan.pending)
        self._estimate, self._started = plan.seconds_per_session, self.clock()
        if self.quiet or not self._total:
            return
        n, label = self._total, model_label(plan.model, plan.local)
        head = f"{n} of {plan.selected} sessions need" if n < plan.selected else f"{n} session{'s' * (n > 1)} need{'s' * (n == 1)}"
        lines = [f"{head} a summary from {label}" + (", newest first." if n > 1 else ".")]
        if plan.seconds_per_session:
            lines.append(f"Estimated time: about {duration(n * plan.seconds_per_session, coarse=True)} "
                         f"({duration(plan.seconds_per_session, coarse=True)} a session in the last run).")
        elif n > 1:
            lines.append("Estimated time: measured on the first session.")
        if n > 1:
            if plan.local:
                lines.append(FASTER)
            lines.append("Ctrl-C stops; notes already written are kept and the same command goes on from there.")
        self._say("\n".join(lines))
        if self.tty and n > 1:
            self._start_bar()

    def result(self, result: SessionResult) -> None:
        if result.status == "written":
            self.written += 1
        if not self.quiet:
            for to_err, line in result_lines(result.model_dump(mode="json")):
                if to_err:
                    self._say(line)
                elif self._bar is not None and self.out.isatty():  # one terminal: keep the bar intact
                    self._bar.console.print(line, markup=False, highlight=False, soft_wrap=True)
                else:
                    print(line, file=self.out, flush=True)
        if result.session_id not in self._pending:
            return
        self._pending.discard(result.session_id)
        self._done += 1
        self._last_done = self.clock()
        if self._first_done is None:
            self._first_done = self._last_done
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=self._done)
        elif self._total > 1 or not self.tty:
            self._say(f"{self._done}/{self._total} done, {self._total - self._done} left · {self.rate()} · "
                      f"{self.left()} · {result.session_id} {result.status}")

    def close(self) -> None:
        bar, self._bar = self._bar, None
        if bar is not None:
            bar.stop()

    def interrupted(self) -> str:
        self.close()
        done = f"the {self.written} note{'s' * (self.written != 1)} written so far are" if self.written else \
            "notes already written are"
        return f"Interrupted: {done} complete; run the same command again to go on (finished summaries are cached)."

    # -- figures ------------------------------------------------------------------------

    def per_session(self) -> float | None:
        """Seconds a session, measured after the first one: that one also pays for importing litellm and
        starting the model server (the warm-up), so it is the rate only until a second is done."""
        if self._first_done is None:
            return self._estimate
        if self._done > 1:
            return (self._last_done - self._first_done) / (self._done - 1)
        return self._first_done - self._started

    def rate(self) -> str:
        each = self.per_session()
        return f"{duration(each, coarse=True)} a session" if each is not None and self._done else "rate after the first session"

    def left(self) -> str:
        each, rest = self.per_session(), self._total - self._done
        if not rest:
            return "done"
        if each is None:
            return "time left after the first session"
        # Between two results the count-down goes on with the time spent on the current session.
        current = self.clock() - (self._last_done if self._done else self._started)
        return f"about {duration(max(0.0, rest * each - current), coarse=True)} left"

    # -- output -------------------------------------------------------------------------

    def _say(self, text: str) -> None:
        if self._bar is not None:
            self._bar.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            print(text, file=self.err, flush=True)

    def _start_bar(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            ProgressColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.text import Text

        watch = self

        class Figures(ProgressColumn):
            def render(self, task: Any) -> Text:
                if not watch._done and watch._estimate is None:
                    return Text("measuring the first session")
                return Text(f"{watch.rate()}, {watch.left()}" if watch._done else watch.left())

        self._bar = Progress(TextColumn("distilling"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                             Figures(), console=Console(file=self.err), transient=True,
                             redirect_stdout=False, redirect_stderr=False)
        self._task = self._bar.add_task("distilling", total=self._total)
        self._bar.start()
