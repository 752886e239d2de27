"""Progress bars (megakernel/progress.py): drawn on stderr while it is a terminal, never otherwise."""

import io
import sys

from checkpoint_tools import micro_config
from megakernel.progress import bytes_bar
from megakernel.synthetic import synthetic_weights


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
