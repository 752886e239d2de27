"""Progress bars (megakernel/progress.py): drawn on stderr while it is a terminal, never otherwise."""

import io
import sys

from checkpoint_tools import micro_config
from megakernel.progress import bytes_bar
from megakernel.model.synthetic import synthetic_weights


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_bar_is_drawn_on_a_terminal_and_nowhere_else(monkeypatch, capsys):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    weights = synthetic_weights(micro_config())
    drawn = terminal.getvalue()
    assert "synthesising weights:" in drawn and "B/s" in drawn, drawn  # a bar with a byte rate (cleared at the end)
    with bytes_bar(10, "off", enabled=False) as bar:  # a caller's progress=False
        bar.update(10)
    assert "off" not in terminal.getvalue()
    monkeypatch.undo()
    again = synthetic_weights(micro_config())  # stderr captured by pytest: not a terminal
    assert capsys.readouterr() == ("", "")
    name = next(iter(weights.tensors))
    assert (weights[name] == again[name]).all()  # the bar changes nothing it counts


def test_writing_a_checkpoint_draws_its_bar(tmp_path, monkeypatch):
    from megakernel.model.checkpoint_writer import write_synthetic_checkpoint

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    write_synthetic_checkpoint(str(tmp_path / "micro-ckpt"), micro_config(), shard_bytes=1 << 20)
    assert "writing micro-ckpt:" in terminal.getvalue()


def test_validation_reports_every_stage_once():
    from compiler import lower, validate

    program = lower(micro_config(), rows=1, sms=7)
    seen = []
    report = validate(program, 7, steps=2, on_progress=lambda done, total: seen.append((done, total)))
    stages = sum(2 if w.arrival_count else 1 for w in program.words)  # split-K finishes are a stage
    assert report.ok and seen == [(i + 1, 2 * stages) for i in range(2 * stages)]


def test_compile_validate_draws_its_bar_on_a_terminal_only(monkeypatch, capsys):
    from megakernel import cli

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert cli.main(["compile", "--validate", "--json"]) == 0
    assert "validating:" in terminal.getvalue() and "stage" in terminal.getvalue()
    monkeypatch.undo()
    assert cli.main(["compile", "--validate", "--json"]) == 0
    assert capsys.readouterr().err == ""
