"""bench --ttft's pieces that need no GPU (megakernel/measurement/ttftbench.py): the GEMM FLOPs the compute floor
and the TFLOP/s figures rest on, the plot, and the CLI's refusals."""

import json

import pytest

from megakernel.cli import main
from megakernel.measurement import ttftbench
from megakernel.model.config import preset
from megakernel.model.tensors import tensor_specs


def test_the_prompt_gemm_flops_are_two_per_decoder_linear_weight():
    """The prompt program's GEMM words together multiply each decoder layer's linear weights once a row: 2 FLOPs a
    weight (the head and the MTP head read one row and are no GEMM words)."""
    weights = sum(s.shape[0] * s.shape[1] for s in tensor_specs(preset("tiny"))
                  if ".layers." in s.name and "mtp" not in s.name and "proj" in s.name and s.name.endswith(".weight"))
    assert ttftbench._flops_per_token("synthetic:tiny", 64, 256) == 2 * weights


def test_the_plot_draws_every_build_and_path(tmp_path):
    result = {"dense_f16_tflops": 700.0, "prompt_flops_per_token": 2 * 24.35e9, "builds": {
        mode: {"time_to_first_token": [
            {"prompt_tokens": n, "prompt_path": p, "ms": ms} for p, f in (("program", 0.1), ("passes", 3.4))
            for n, ms in ((128, 128 * f), (1024, 1024 * f))] + [
            {"prompt_tokens": 32768, "prompt_path": "passes", "skipped": "longer than 4096"}]}
        for mode in ("graph", "megakernel")}}
    out = tmp_path / "ttft.png"
    ttftbench.plot(result, str(out))
    assert out.stat().st_size > 10_000
    json.dumps(result)


@pytest.mark.parametrize("argv, message", [
    (["--ttft", "128,x"], "--ttft: a comma list of prompt lengths"),
    (["--ttft", "1"], "prompt lengths must be at least 2 tokens"),
    (["--ttft", "128", "--prompt-paths", "program,chunked"], "--prompt-paths: a comma list of program, passes"),
    (["--ttft", "128", "--prompt-chunk", "100"], "--prompt-chunk: a multiple of 64 in 64..2048"),
    (["--ttft", "128", "--iters", "0"], "--iters must be positive"),
])
def test_bench_ttft_refuses_bad_arguments_in_one_line(capsys, monkeypatch, argv, message):
    import megakernel.cli as cli

    monkeypatch.setattr(cli, "_require_gpu", lambda what: None)  # the refusals come before any GPU work
    code = main(["bench", "--out", "x.json", "--backends", "graph", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err
