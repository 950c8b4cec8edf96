"""`train run`'s live display: what it draws for a round and a step, and that it stays off
under --quiet and when stdout is not a terminal."""
from __future__ import annotations

import io

from train.progress import LiveProgress, make_monitor, step_line


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def text_of(monitor: LiveProgress) -> str:
    from rich.console import Console

    out = Console(file=io.StringIO(), width=100, color_system=None)
    out.print(monitor.render())
    return out.file.getvalue()


def test_only_an_interactive_terminal_gets_the_display():
    assert make_monitor(quiet=False, stream=io.StringIO()) is None  # a pipe, a CI log
    assert make_monitor(quiet=True, stream=Terminal()) is None
    monitor = make_monitor(quiet=False, stream=Terminal())
    assert isinstance(monitor, LiveProgress)
    monitor.close()


def test_a_round_shows_rows_tokens_statuses_then_the_steps_phases():
    monitor = LiveProgress(Terminal())
    monitor.round_started(3, expansions=2, tasks=2)
    monitor.expansion_generated(nodes=32, tokens=4100)
    monitor.expansion_executed(16, ["ok"] * 10 + ["crashed"] * 5 + ["timeout"])
    shown = text_of(monitor)
    assert "Round 3" in shown and "1/4 task-expansions" in shown
    assert "generated 32 rows, 4,100 tokens" in shown
    assert "executed 16 nodes: ok 10 · crashed 5 · timeout 1" in shown
    assert "ETA 0:00:0" in shown  # three task-expansions left at this pace
    monitor.expansion_executed(15, ["ok"] * 15 + ["no_code"])
    monitor.step_started(3)
    monitor.phase_started("adv")
    monitor.phase_finished("adv", 0.5)
    monitor.phase_started("update_actor")
    shown = text_of(monitor)
    assert "executed 31 nodes: ok 25 · crashed 5 · no_code 1 · timeout 1" in shown
    assert "Step 3" in shown and "adv 0.5 s · update_actor …" in shown
    assert "ETA -" in shown.split("Step 3")[1]  # the first step has no pace to go by
    monitor.phase_finished("update_actor", 2.0)
    monitor.round_finished()
    monitor.round_started(4, expansions=2, tasks=2)
    monitor.step_started(4)
    assert "ETA 0:00:02" in text_of(monitor).split("Step 4")[1]  # the last step took 2.5 s
    monitor.close()


def test_log_lines_print_above_the_display():
    stream = Terminal()
    monitor = LiveProgress(stream)
    monitor.round_started(1, expansions=1, tasks=1)
    monitor.log("Round 1: 16 nodes generated")
    monitor.close()
    assert "Round 1: 16 nodes generated" in stream.getvalue()


def test_warnings_print_above_the_display_once_and_leave_no_frames():
    import logging
    import warnings

    stream = Terminal()
    monitor = make_monitor(stream=stream)
    warnings.warn("a model's loading warns before round 1", FutureWarning, stacklevel=1)
    monitor.round_started(1, expansions=1, tasks=1)
    for _ in range(3):  # a sandbox fallback notice and a library's FutureWarning, each said thrice
        logging.getLogger("train.env.sandbox").warning("sandbox: %s", "no network namespace")
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("`past_key_values` is deprecated", FutureWarning, stacklevel=1)
    print("a stray print")  # redirected above the display too
    monitor.close()
    out = stream.getvalue()
    assert out.count("Warning: sandbox: no network namespace") == 1
    assert out.count("Warning: FutureWarning: `past_key_values` is deprecated") == 1
    assert out.index("Warning: FutureWarning: a model's loading warns") < out.index("Round 1")
    assert "a stray print" in out
    assert "\x1b[33m  generated" not in out  # the warning's colour stays on the warning
    # the display is transient: after close no frame is left, only the lines printed above it
    lines = [line for line in out.replace("\r", "\n").split("\n") if line.strip()]
    assert not any("task-expansions" in line for line in lines[-3:]), lines


def test_capture_ends_with_the_monitor():
    import logging
    import warnings

    shown, handlers = warnings.showwarning, list(logging.getLogger().handlers)
    monitor = make_monitor(stream=Terminal())
    monitor.round_started(1, expansions=1, tasks=1)
    monitor.round_finished()
    assert warnings.showwarning is not shown  # between rounds too
    monitor.close()
    assert warnings.showwarning is shown and logging.getLogger().handlers == handlers


def test_a_step_line_is_short_and_grouped():
    metrics = {"loss": 0.012345, "pg_loss": 0.0101, "kl": 0.00041, "kl_coef": 0.001, "entropy": 1.2345,
               "clip_frac": 0.02, "grad_norm": 0.85, "lr": 1e-5, "tokens": 4096, "micro_batches": 2,
               "peak_mem_gib": None, "epochs": 1, "ratio_max": 1.3, "nonzero_advantages": 6}
    assert step_line(3, metrics, 12.34) == ("Step 3: loss 0.0123 · kl 0.00041 · entropy 1.23 · clip 0.02 · "
                                            "lr 1e-05 · 4,096 tokens · 12.3 s")
    assert step_line(1, {"tokens": 0, "micro_batches": 0, "skipped": "no response tokens"}) == \
        "Step 1: skipped (no response tokens)"


def test_the_step_line_breaks_between_phases_at_80_columns():
    from rich.console import Console

    phases = ["old_log_prob", "ref", "adv", "update_actor", "update_weights", "save_checkpoint"]
    for seconds in (1.0, 12.3, 123.4, 1234.5):  # where the 80th column falls moves with the digits
        monitor = LiveProgress(Terminal())
        monitor.console.width = 80
        monitor.step_started(12)
        for name in phases:
            monitor.phase_started(name)
            monitor.phase_finished(name, seconds)
        out = Console(file=io.StringIO(), width=80, color_system=None)
        out.print(monitor.render())
        lines = out.file.getvalue().splitlines()
        assert len(lines) > 1 and max(map(len, lines)) <= 80, lines
        for name in phases:  # each phase with its seconds on one line
            assert sum(f"{name} {seconds:.1f} s" in line for line in lines) == 1, lines
        assert "ETA -" in lines[-1], lines
        monitor.close()
