"""Command line: ``megakernel <command> ...`` (also ``python -m megakernel``)."""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import signal
import sys

from isa.opcodes import MAX_ROWS, PROMPT_MAX_ROWS

from . import __version__
from .generation.passes import PROMPT_CHUNK, PROMPT_PATHS, PROMPT_PROGRAM_MIN
from .measurement.budgets import (DEVICE_RESERVE_BYTES, budgets, host_available_bytes, host_plan, session_plan,
                                  sessions_that_fit)
from .model.config import PRESETS
from .errors import InputError, MegakernelError
from .model.models import DEFAULT_MODEL, model_config
from .progress import count_bar

MODEL_HELP = f"checkpoint directory or synthetic:<preset>[:seed], presets: {', '.join(PRESETS)} (default {DEFAULT_MODEL})"
DEFAULT_CONTEXT = 4096  # generate's session capacity, and the context `info --device` sizes sessions for
INTERRUPTED_STATUS = 128 + 2  # Ctrl-C (SIGINT), as a shell reports an interrupted command
CLOSED_PIPE_STATUS = 128 + 13  # the reader went away (SIGPIPE), as for a tool the signal killed
TERMINATED_STATUS = 128 + 15  # SIGTERM


class _Help(argparse.ArgumentDefaultsHelpFormatter):
    """--help shows each option's default, unless it has none (None, a flag that is off) or its help
    already says it."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "default" in text:
            return text
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """argparse's own errors (a bad choice, a bad number, a missing or conflicting flag) as one line,
    `megakernel: error: ...`, exit status 2, like every other user error; --help shows the defaults."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:
        command = self.prog.partition(" ")[2]  # the subcommand, for the subparsers' errors
        where = f"{command}: " if command else ""
        self.exit(2, f"megakernel: error: {where}{' '.join(message.split())}\n")


def _device_capacity(cupy, config, context: int) -> dict:
    """Free and total device memory and how many sessions of `context` tokens fit in the free memory
    beside one copy of the weights (sizes as discrete/backend.py allocates them; budgets.session_plan)."""
    free, total = cupy.cuda.runtime.memGetInfo()
    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    plan = session_plan(config, context)
    fit = sessions_that_fit(free, plan["weight_arena_bytes"], plan["session_bytes"],
                            DEVICE_RESERVE_BYTES + plan["weight_staging_bytes"])
    return {"device": name.decode() if isinstance(name, bytes) else str(name),
            "device_free_bytes": int(free), "device_total_bytes": int(total), **plan,
            "reserve_bytes": DEVICE_RESERVE_BYTES, "sessions_that_fit": fit}


# The device code keeps positions and KV rows in 32-bit signed integers, a pass's rows past the last one.
MAX_CONTEXT = 2**31 - 1 - MAX_ROWS


def _check_context(context: int) -> None:
    if context < 1:
        raise InputError(f"--context must be at least 1 token, got {context}")
    if context > MAX_CONTEXT:
        raise InputError(f"--context must be at most {MAX_CONTEXT:,} tokens (32-bit positions), got {context:,}")


def _check_out_path(path: str) -> None:
    """An output file's folder exists and the file is not a folder: said before any work is done."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InputError(f"--out {path}: no such folder {folder}")
    if os.path.isdir(path):
        raise InputError(f"--out {path} is a folder; give a file name")


def cmd_info(args: argparse.Namespace) -> None:
    if args.context is not None and not args.device:
        raise InputError("--context needs --device (it sizes the sessions that fit in the device's memory)")
    context = DEFAULT_CONTEXT if args.context is None else args.context
    _check_context(context)
    cupy = _require_gpu("info --device") if args.device else None
    c = model_config(args.model)
    info = {
        "model": args.model,
        "layers": c.num_hidden_layers,
        "gdn_layers": len(c.gdn_layers),
        "attention_layers": len(c.attention_layers),
        "attention_layer_indices": list(c.attention_layers),
        "hidden_size": c.hidden_size,
        "intermediate_size": c.intermediate_size,
        "attention_heads": c.num_attention_heads,
        "kv_heads": c.num_key_value_heads,
        "head_dim": c.head_dim,
        "rotary_dim": c.rotary_dim,
        "rope_theta": c.rope_theta,
        "gdn_key_heads": c.linear_num_key_heads,
        "gdn_value_heads": c.linear_num_value_heads,
        "gdn_head_dim": c.linear_key_head_dim,
        "conv_kernel": c.linear_conv_kernel_dim,
        "mtp_layers": c.mtp_num_hidden_layers,
        "vocab_size": c.vocab_size,
        "defined_vocab": c.defined_vocab,
        "rms_norm_eps": c.rms_norm_eps,
        **budgets(c),
    }
    if cupy is not None:
        info.update(_device_capacity(cupy, c, context))
    if args.json:
        print(json.dumps(info, indent=2))
        return
    notes = {
        "weight_arena_bytes": "one copy, shared by every session",
        "weight_staging_bytes": "the largest tensor, on the device while the weights load",
        "session_bytes": f"one session of {context:,} tokens: KV caches, GDN states, activations",
        "reserve_bytes": "kept free: kernel modules, CUDA graphs, pool rounding, per-pass scratch",
        "sessions_that_fit": f"sessions of {context:,} tokens in the free memory, beside the weights",
    }
    width = max(map(len, info))
    for key, value in info.items():
        shown = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else value
        if key == "decode_floor_ms_h200":
            shown = f"{value:.3f}  (derived: weight bytes / 4,453 GB/s measured on the H200)"
        elif key.endswith("_bytes") and (key.startswith("device_") or key in notes):
            shown = f"{value:,}  ({value / 1e9:.2f} GB{'; ' + notes[key] if key in notes else ''})"
        elif key in notes:
            shown = f"{shown}  ({notes[key]})"
        print(f"{key:<{width}}  {shown}")


def _parse_size(text: str) -> int:
    units = {"": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30}
    match = re.fullmatch(r"(\d+)([A-Za-z]*)", text)
    number, unit = (match.group(1), match.group(2).upper()) if match else ("", "?")
    if not number or unit not in units or int(number) == 0:
        raise argparse.ArgumentTypeError(f"bad size {text!r} (examples: 4GB, 500MB, 1048576)")
    return int(number) * units[unit]


def _parse_ids(text: str) -> list[int]:
    try:
        return [int(t) for t in re.split(r"[,\s]+", text.strip()) if t]
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad token ids {text!r} (integers separated by commas or spaces, "
                                         f"e.g. 9707,11)") from None


def cmd_make_checkpoint(args: argparse.Namespace) -> None:
    from .model.checkpoint_writer import write_synthetic_checkpoint
    from .model.config import preset

    config = preset(args.preset)
    write_synthetic_checkpoint(args.out, config, seed=args.seed, pow2_scales=args.pow2_scales,
                               shard_bytes=args.shard_size)
    print(f"wrote {args.out} ({args.preset}, seed {args.seed}, "
          f"{'power-of-two' if args.pow2_scales else 'amax/448'} scales)")


def cmd_tokenize(args: argparse.Namespace) -> None:
    from .model.tokenizer import load_tokenizer

    tok = load_tokenizer(args.tokenizer)
    ids = tok.encode(args.text, allow_special=not args.no_special)
    if args.json:
        print(json.dumps({"ids": ids, "pieces": [tok.token_bytes(i).decode("utf-8", "replace") for i in ids]}))
    else:
        print(" ".join(map(str, ids)))


def cmd_detokenize(args: argparse.Namespace) -> None:
    from .model.tokenizer import load_tokenizer

    sys.stdout.write(load_tokenizer(args.tokenizer).decode(args.ids) + "\n")


def cmd_generate(args: argparse.Namespace) -> int:
    from .generation.generate import INTERRUPTED, ReferenceBackend, check_prompt_ids, generate
    from .model.models import open_weights
    from .reference import ReferenceModel
    from .model.sampling import SamplingParams
    from .model.tokenizer import load_tokenizer

    program_backends = ("interpreter", "eager", "graph", "megakernel")
    if args.backend == "auto":  # the megakernel where a GPU can run it, else the CPU (which one ran is reported)
        args.backend = "megakernel" if args.numerics != "oracle" and _gpu_problem() is None else "reference"
    args.numerics = args.numerics or ("engine" if args.backend in program_backends else "oracle")
    # Every check that needs no weights comes before they are built or loaded.
    if args.temperature == 0 and (args.top_k or args.top_p < 1):
        raise InputError("--top-k / --top-p need --temperature > 0 (temperature 0 is greedy)")
    params = SamplingParams(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    if args.max_new_tokens < 1:
        raise InputError(f"--max-new-tokens must be at least 1, got {args.max_new_tokens}")
    _check_context(args.context)
    if args.prompt_ids is not None and args.chat:
        raise InputError("--chat wraps --prompt text in the chat template: it does not take --prompt-ids")
    if args.spec_k:
        from .generation.speculative import check_draft_count

        check_draft_count(args.spec_k)
    if args.spec_k and args.backend not in program_backends:
        raise InputError("--spec-k needs a backend that runs the compiled Programs (interpreter, eager, graph, "
                         "megakernel): the NumPy reference has no verify pass")
    if args.draft_vocab == "working" and not args.spec_k:
        raise InputError("--draft-vocab working needs --spec-k (it restricts the MTP head's drafts)")
    if args.backend in program_backends and args.numerics != "engine":
        raise InputError(f"--backend {args.backend} computes the engine's numerics: use --numerics engine")
    if args.prompt_path == "program" and args.backend == "reference" and args.numerics != "engine":
        raise InputError("--prompt-path program is the engine's prompt arithmetic: use --numerics engine")
    config = model_config(args.model)
    if args.backend in ("reference", "interpreter"):
        _check_host_memory(config, args)
    tokenizer = load_tokenizer(None if args.model.startswith("synthetic:") else args.model)
    if args.prompt_file is not None or args.prompt == "-":
        args.prompt = _read_prompt(args.prompt_file)
    if args.prompt_ids is not None:
        prompt_ids = args.prompt_ids
    elif args.chat:
        prompt_ids = tokenizer.encode_chat([{"role": "user", "content": args.prompt}])
    else:
        prompt_ids = tokenizer.encode(args.prompt)
    prompt_ids = check_prompt_ids(prompt_ids, config.defined_vocab)
    if args.backend in ("eager", "graph", "megakernel"):
        cupy = _require_gpu(f"generate --backend {args.backend}")
        from discrete.backend import DiscreteBackend

        try:
            backend = DiscreteBackend(args.model, args.context, args.backend, prompt_path=args.prompt_path)
        except cupy.cuda.memory.OutOfMemoryError as e:
            raise InputError(_out_of_memory(cupy, config, args.context)) from e
    elif args.backend == "interpreter":
        from .generation.generate import InterpreterBackend

        backend = InterpreterBackend(open_weights(args.model), args.context, prompt_path=args.prompt_path)
    else:
        backend = ReferenceBackend(ReferenceModel(open_weights(args.model), args.numerics), args.context,
                                   args.prompt_path)

    if args.draft_vocab == "working":
        backend.set_draft_vocab()

    def stream(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    result = generate(backend, tokenizer, prompt_ids, args.max_new_tokens, params,
                      on_text=None if args.json else stream, spec_k=args.spec_k)
    if args.json:
        print(json.dumps({**result.as_dict(), "backend": args.backend}))
    else:
        sys.stdout.write("\n")
        spec = ""
        if result.drafts_accepted:
            kept = result.drafts_accepted
            spec = f", {len(kept)} verify passes kept {sum(kept)} of {args.spec_k * len(kept)} drafts"
        full = ""
        if result.stop_reason == "context_full" and not result.tokens:
            full = f", the prompt fills the {args.context}-token session (--context)"
        print(f"[{len(result.tokens)} tokens, {result.stop_reason}, {result.ms_per_token:.1f} ms/token, "
              f"prompt {len(prompt_ids)} tokens in {result.prompt_ms:.0f} ms, backend {args.backend}{spec}{full}]",
              file=sys.stderr)
    if result.stop_reason == INTERRUPTED:
        return INTERRUPTED_STATUS  # the stats line above says so; no second line
    return 0


MAX_PROMPT_BYTES = 16 * 2**20  # far above any context this engine holds; a bound on what is read


def _read_prompt(path: str | None) -> str:
    """The prompt text of --prompt-file PATH, or of standard input (path None: --prompt -), as UTF-8."""
    where = "standard input" if path is None else f"--prompt-file {path}"
    try:
        if path is None:
            data = sys.stdin.buffer.read(MAX_PROMPT_BYTES + 1)
        else:
            if not os.path.isfile(path):  # a folder, a FIFO or a device would block or read without end
                kind = "a folder" if os.path.isdir(path) else "not a regular file" if os.path.exists(path) else "no such file"
                raise InputError(f"{where}: {kind}")
            with open(path, "rb") as f:
                data = f.read(MAX_PROMPT_BYTES + 1)
    except OSError as e:
        raise InputError(f"{where}: {e.strerror or e}") from e
    if len(data) > MAX_PROMPT_BYTES:
        raise InputError(f"{where}: more than {MAX_PROMPT_BYTES // 2**20} MiB of prompt")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{where}: not UTF-8 text (byte {e.start})") from e


def _check_host_memory(config, args: argparse.Namespace) -> None:
    """A CPU backend's weights and session fit in the host's available memory, or one line with the
    figures, before anything is built (a session too large would otherwise fail late, or swap)."""
    backend = args.backend
    need, available = host_plan(config, args.context, backend), host_available_bytes()
    total, weights = sum(need.values()), need["weight_bytes"]
    if available is None or total <= available:
        return
    if weights > available:
        raise InputError(f"--backend {backend} holds the weights of {args.model} in host memory, {weights / 1e9:,.1f} GB; "
                         f"{available / 1e9:,.1f} GB are available: use a GPU backend (--backend graph or megakernel)")
    raise InputError(f"--backend {backend} with --context {args.context:,} needs {total / 1e9:,.1f} GB of host memory "
                     f"(weights {weights / 1e9:,.1f} GB, KV cache {need['cache_bytes'] / 1e9:,.1f} GB), "
                     f"{available / 1e9:,.1f} GB are available: try a smaller --context or a GPU backend")


def _out_of_memory(cupy, config, context: int) -> str:
    """Why a GPU backend did not fit: the figures of `info --device` for this model and context."""
    cupy.get_default_memory_pool().free_all_blocks()  # what the failed build held
    free = _device_capacity(cupy, config, context)
    return (f"out of device memory: the weights take {free['weight_arena_bytes'] / 1e9:.2f} GB and a "
            f"{context}-token session {free['session_bytes'] / 1e9:.2f} GB, {free['device_free_bytes'] / 1e9:.2f} GB "
            f"are free ({free['sessions_that_fit']} such sessions fit): try a smaller --context "
            f"(megakernel info --device --context N)")


def cmd_compile(args: argparse.Namespace) -> None:
    from compiler import lower, lower_mtp, lower_mtp_prompt, lower_prompt, validate

    chunk = args.program in ("prompt", "mtp-prompt")
    most = PROMPT_MAX_ROWS if chunk else MAX_ROWS
    if not 1 <= args.rows <= most:
        raise InputError(f"--rows must be 1..{most} for the {args.program} program, got {args.rows}")
    if args.sms < 1:
        raise InputError(f"--sms must be at least 1, got {args.sms}")
    _check_context(args.context)
    if args.out:
        _check_out_path(args.out)
    config = model_config(args.model)
    options = dict(rows=args.rows, sms=args.sms, capacity=args.context, debug_logits=args.debug_logits)
    if args.program == "target":
        program = lower(config, **options)
    elif chunk:
        if args.debug_logits:
            raise InputError(f"--debug-logits: the {args.program} program has no head")
        if args.program == "mtp-prompt" and not config.mtp_num_hidden_layers:
            raise InputError(f"--program mtp-prompt: {config.name} has no MTP layer")
        build = lower_prompt if args.program == "prompt" else lower_mtp_prompt
        program = build(config, rows=args.rows, sms=args.sms, capacity=args.context)
    else:
        program = lower_mtp(config, chained=args.program == "mtp-chained", **options)
    report = None
    if args.validate:
        with count_bar(0, "validating", "stage") as bar:
            def advance(done: int, total: int) -> None:
                bar.total = total
                bar.update(done - bar.n)

            report = validate(program, args.sms, on_progress=advance)
    if args.out:
        try:
            with open(args.out, "wb") as f:
                f.write(program.to_bytes())
        except OSError as e:
            raise InputError(f"--out {args.out}: {e.strerror or e}") from e
    summary = program.to_json()
    if not args.full_json:
        summary = {k: v for k, v in summary.items() if k not in ("program", "buffers", "weights")}
    if report is not None:
        summary["validated"] = {"ok": report.ok, "nodes": report.nodes, "problems": report.problems}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        if args.listing:
            print(program.listing())
        print(f"{len(program.words)} words ({', '.join(f'{k} {v}' for k, v in summary['opcodes'].items())}); "
              f"{len(program.counters)} counters; arena {program.arena_bytes:,} B; weights {program.weight_bytes:,} B; "
              f"compiled in {program.meta['compile_seconds']:.2f} s")
        if report is not None:
            print(f"validator: {'proved race- and deadlock-free' if report.ok else 'FAILED'} "
                  f"({report.nodes:,} nodes over 3 steps on {args.sms} blocks)")
            for problem in report.problems:
                print("  " + problem)
    if report is not None and not report.ok:
        raise SystemExit(1)


def _gpu_problem() -> str | None:
    """Why no GPU backend can run here (CuPy missing, or CuPy seeing no usable device), or None."""
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed (pip install -e '.[gpu]')"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CUDARuntimeError without a driver or a device; its message says which
        return f"CuPy sees no usable GPU ({' '.join(str(e).split())})"
    return None if count > 0 else "CuPy sees no GPU"


def _require_gpu(command: str):
    """CuPy with a usable GPU, or one line saying what is missing, for a command that runs on the GPU."""
    problem = _gpu_problem()
    if problem:
        raise InputError(f"megakernel {command} needs an NVIDIA GPU: {problem}")
    import cupy

    return cupy


def cmd_trace(args: argparse.Namespace) -> None:
    """The megakernel's per-block trace of `--steps` passes at `--context` (synthetic weights on the GPU)."""
    _require_gpu("trace")
    import numpy as np

    from compiler import lower
    from discrete.backend import device_weights

    from .measurement import trace
    from .runtime.device import DeviceSession
    from .runtime.persistent import Megakernel

    if args.steps < 1 or args.context < 1:
        raise InputError("--steps and --context must be positive")
    config = model_config(args.model)
    program = lower(config, rows=1, capacity=args.context + args.steps + 1)
    mega = Megakernel(program, device_weights(program, args.model), DeviceSession(program))
    mega.reset()
    mega.session.set_tokens([args.token], config.vocab_size)
    mega.session.set_position(args.context - 1)  # KV rows read are the cache's zeros: the same bytes and work
    mega.run(1)  # warm-up (module load, first touch)
    records = mega.trace_buffer(args.steps)
    mega.run(args.steps, trace=records)
    records = records.get()
    if args.records:  # raw records and what rebuilds the Program: analysis without the GPU
        np.savez_compressed(args.records, records=records, model=args.model, context=args.context,
                            capacity=program.meta["capacity"])
        print(f"wrote {args.records}")
    with (gzip.open if args.out.endswith(".gz") else open)(args.out, "wt") as f:
        json.dump(trace.chrome_trace(records, program), f)
    print(trace.table_text(trace.opcode_table(records, program, args.context)))
    print(f"wrote {args.out} (open in ui.perfetto.dev or chrome://tracing)")
    if args.plot:
        trace.timeline_png(records, program, args.plot)
        print(f"wrote {args.plot}")


def cmd_bench(args: argparse.Namespace) -> None:
    """Backends interleaved on one session (GPU): results JSON in the contract's layout, optional plot."""
    import datetime

    cupy = _require_gpu("bench")
    from compiler import lower
    from discrete.backend import device_pass, device_weights
    from discrete.kernels import read_bandwidth_gbps
    from discrete.launcher import DiscreteProgram

    from .measurement import abtest
    from .measurement.budgets import instruction_bytes
    from .runtime.device import DeviceSession
    from .runtime.persistent import Megakernel
    from .provenance import git_commit

    names = args.backends.split(",")
    if not names or any(n not in BENCH_BACKENDS for n in names):
        raise InputError(f"--backends: a comma list of {', '.join(BENCH_BACKENDS)} (got {args.backends!r})")
    contexts = [int(c) for c in args.contexts.split(",")]
    if min(contexts) < 1 or args.tokens < 1 or args.rounds < 1:
        raise InputError("--contexts, --tokens and --rounds must be positive")
    if args.spec_k:
        return _bench_speculative(args, names, contexts[0])
    if args.ttft is not None:
        return _bench_ttft(args, names)
    config = model_config(args.model)
    program = lower(config, rows=1, capacity=max(contexts) + args.tokens + 1)
    session = DeviceSession(program)
    weights = device_weights(program, args.model)
    graph, mega = DiscreteProgram(program, weights, session), Megakernel(program, weights, session)
    steps = {n: device_pass(mega if n == "megakernel" else graph, n) for n in BENCH_BACKENDS}
    bandwidth = read_bandwidth_gbps()
    mega.reset()
    session.set_tokens([args.token], config.vocab_size)

    def start_at(context: int) -> None:
        session.set_position(context - 1)

    for name in names:  # warm-up: module loads, graph capture
        start_at(contexts[0])
        steps[name]()
    floor = {c: sum(instruction_bytes(program, w, c) for w in program.words) / bandwidth / 1e6 for c in contexts}
    head = {
        "device": cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode(),
        "git_commit": git_commit(), "command": "megakernel " + " ".join(sys.argv[1:]),
        "created": datetime.datetime.now(datetime.UTC).isoformat(), "model": args.model,
        "read_bandwidth_gbps": bandwidth, "tokens_per_round": args.tokens, "rounds": args.rounds,
    }

    def write(samples: list[abtest.Sample], complete: bool) -> dict:
        """The results so far at --out: after each context (`complete` false until the last), so that a run
        stopped at a time limit leaves its finished contexts."""
        mega.check()  # a stalled or failed megakernel pass ends the run before its samples are written
        done = sorted({s.context for s in samples}, key=contexts.index)
        result = {**head, "complete": complete, "contexts_done": done,
                  **abtest.summarize(samples, floor),
                  "samples": [{"backend": s.backend, "context": s.context, "round": s.round, "ms": s.ms}
                              for s in samples]}
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        return result

    samples = abtest.interleave({n: steps[n] for n in names}, contexts, args.tokens, args.rounds, start_at,
                                abtest.event_ms, context_done=lambda s: write(s, False))
    result = write(samples, True)
    for st in result["steps"]:
        print(f"{st['backend']:<11} context {st['context']:>6}: {st['ms_per_token']:.3f} ms/token "
              f"(p10 {st['p10']:.3f}, p90 {st['p90']:.3f}), {100 * st['floor_fraction']:.1f} % of the floor")
    for context, r in result["ratio_megakernel_over_graph"].items():
        print(f"megakernel / graph at {context}: {r['median']:.4f} (p10 {r['p10']:.4f}, p90 {r['p90']:.4f})")
    print(f"wrote {args.out}")
    if args.plot:
        abtest.plot(samples, args.plot)
        print(f"wrote {args.plot}")


BENCH_BACKENDS = ("megakernel", "graph", "eager")


def _bench_speculative(args: argparse.Namespace, modes: list[str], context: int) -> None:
    """bench --spec-k K: pass costs against rows, MTP draft costs, tokens/s against the acceptance rate,
    time to first token (megakernel/measurement/specbench.py), per build; JSON and an optional plot."""
    from .measurement import specbench
    from .generation.speculative import check_draft_count

    check_draft_count(args.spec_k)
    ttft = _ttft_lengths(args.ttft or SPEC_TTFT)
    if args.prompt_tokens < 1:
        raise InputError("--prompt-tokens must be positive")
    result = specbench.run(args.model, args.spec_k, modes, context, args.tokens, args.prompt_tokens, ttft,
                           SPEC_ITERS if args.iters is None else args.iters)
    verify = [{"backend": mode, "rows": int(m), "ms_per_pass": ms,
               "ratio_to_one_row": b["pass_costs"]["target_relative_to_1_row"][m]}
              for mode, b in result["builds"].items() for m, ms in b["pass_costs"]["target_ms_by_rows"].items()]
    checks = [{"name": f"{mode} {name}: tokens equal plain greedy's", "passed": True, "detail": run}
              for mode, b in result["builds"].items() for name, run in b["decode"].items()]
    _write_results(args, {"verify": verify, "checks": checks, **result}, specbench.plot)


def _write_results(args: argparse.Namespace, result: dict, plot) -> None:
    """A bench variant's results JSON (docs/RESULTS_FILES.md: the common fields, then `result`) at --out, and
    `plot(results, path)` at --plot if asked for."""
    import datetime

    import cupy

    from discrete.kernels import read_bandwidth_gbps

    from .provenance import git_commit

    out = {"device": cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode(),
           "git_commit": git_commit(), "command": "megakernel " + " ".join(sys.argv[1:]),
           "created": datetime.datetime.now(datetime.UTC).isoformat(), "model": args.model,
           "read_bandwidth_gbps": read_bandwidth_gbps(), **result}
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {args.out}")
    if args.plot:
        plot(out, args.plot)
        print(f"wrote {args.plot}")


SPEC_TTFT = "128,1024,4096"  # bench --spec-k's prompt lengths for time to first token
SPEC_ITERS, TTFT_REPEATS = 20, 3  # --iters' defaults: timed repetitions of a pass kind, of a prompt


def _ttft_lengths(text: str) -> list[int]:
    try:
        lengths = [int(n) for n in text.split(",")]
    except ValueError:
        raise InputError(f"--ttft: a comma list of prompt lengths, got {text!r}") from None
    if not lengths or min(lengths) < 2:
        raise InputError(f"--ttft: prompt lengths must be at least 2 tokens, got {text!r}")
    return lengths


def _bench_ttft(args: argparse.Namespace, modes: list[str]) -> None:
    """bench --ttft (no --spec-k): time to first token per build and prompt path, a prompt chunk's profile and
    the prompt GEMMs' TFLOP/s against the dense rate (megakernel/measurement/ttftbench.py); JSON, optional plot."""
    from .measurement import ttftbench

    lengths = _ttft_lengths(args.ttft)
    paths = args.prompt_paths.split(",")
    if not paths or any(p not in ttftbench.PATHS for p in paths):
        raise InputError(f"--prompt-paths: a comma list of {', '.join(ttftbench.PATHS)}, got {args.prompt_paths!r}")
    if not 64 <= args.prompt_chunk <= PROMPT_MAX_ROWS or args.prompt_chunk % 64:
        raise InputError(f"--prompt-chunk: a multiple of 64 in 64..{PROMPT_MAX_ROWS}, got {args.prompt_chunk}")
    repeats = TTFT_REPEATS if args.iters is None else args.iters
    if repeats < 1:
        raise InputError(f"--iters must be positive, got {repeats}")
    _check_context(max(lengths) + 16)
    _write_results(args, ttftbench.run(args.model, modes, lengths, paths, args.prompt_chunk, repeats), ttftbench.plot)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="megakernel", description=(
        "Qwen3.5-27B decode: a persistent megakernel vs a CUDA graph of discrete kernels."))
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="command", parser_class=_Parser)

    p = sub.add_parser("info", help="configuration and per-token byte budgets (reads no weights); --device: "
                                    "how many sessions fit in the GPU's free memory")
    p.add_argument("--model", default=DEFAULT_MODEL, help=MODEL_HELP)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--device", action="store_true",
                   help="also query the GPU (CuPy): free and total memory, the weight arena, one session's bytes "
                        "at --context and how many such sessions fit beside the weights")
    p.add_argument("--context", type=int, default=None,
                   help=f"with --device: session capacity in tokens (default {DEFAULT_CONTEXT})")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("make-checkpoint", help="write a deterministic synthetic checkpoint in the FP8 release format")
    p.add_argument("--preset", required=True, choices=sorted(PRESETS))
    p.add_argument("--seed", type=int, default=0, help="the weights' seed")
    p.add_argument("--out", required=True, help="new (or empty) directory to create")
    p.add_argument("--pow2-scales", action="store_true",
                   help="power-of-two block scales (then bf16(fp8 x scale) is exact)")
    p.add_argument("--shard-size", type=_parse_size, default="4GiB", help="largest shard (default 4GiB)")
    p.set_defaults(func=cmd_make_checkpoint)

    p = sub.add_parser("generate", help="generate text (streams to stdout)")
    p.add_argument("--model", default=DEFAULT_MODEL, help=MODEL_HELP)
    p.add_argument("--backend", default="auto", choices=["auto", "reference", "interpreter", "eager", "graph", "megakernel"],
                   help="auto: the megakernel where CuPy sees a GPU (and --numerics is not oracle), else the "
                        "NumPy reference on the CPU; interpreter: the "
                        "compiled Program run by the CPU interpreter (slow, engine numerics); eager, graph: the "
                        "discrete-kernel build on the GPU, launch by launch or replayed from a CUDA graph; "
                        "megakernel: the persistent kernel on the GPU, one launch per token")
    prompt = p.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt", help="prompt text (tokenized with the model's tokenizer); - reads it from "
                                         "standard input")
    prompt.add_argument("--prompt-file", metavar="PATH", help="prompt text from a UTF-8 file")
    prompt.add_argument("--prompt-ids", type=_parse_ids, metavar="IDS",
                        help="prompt token ids, comma- or space-separated (e.g. 9707,11); each in [0, defined "
                             "vocabulary); give a negative first id as --prompt-ids=-1,2")
    p.add_argument("--chat", action="store_true", help="wrap the prompt as a user turn of the chat template")
    p.add_argument("--max-new-tokens", type=int, default=32, help="tokens generated at most")
    p.add_argument("--temperature", type=float, default=0.0, help="0 (default) is greedy")
    p.add_argument("--top-k", type=int, default=0, help="0 (default): off")
    p.add_argument("--top-p", type=float, default=1.0, help="1 (default): off")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (with --temperature > 0)")
    p.add_argument("--context", type=int, default=DEFAULT_CONTEXT,
                   help="session capacity in tokens, prompt and generated together: generation stops with "
                        "stop_reason context_full when it is full")
    p.add_argument("--spec-k", type=int, default=0,
                   help="speculative decoding: K (1..7) drafts of the model's MTP head per verify pass, greedy "
                        "or sampled (exact acceptance rule); Program backends only (0: off)")
    p.add_argument("--draft-vocab", default="full", choices=["full", "working"],
                   help="with --spec-k: the MTP head drafts over all ids (full) or over a working vocabulary, "
                        "the 4096 lowest ids and the ids the session has seen (megakernel/model/draft_vocab.py)")
    p.add_argument("--numerics", default=None, choices=["oracle", "engine"],
                   help="reference rounding points: the HF oracle's or the GPU engine's (docs/NUMERICS.md)")
    p.add_argument("--prompt-path", default="auto", choices=list(PROMPT_PATHS),
                   help="how the prompt enters: decode passes of up to 8 rows (passes, exact with decode), the "
                        f"prompt program in chunks of {PROMPT_CHUNK} rows (program: the prompt path's arithmetic, "
                        f"docs/NUMERICS.md; the reference needs --numerics engine), or auto (default): the program "
                        f"for prompts of more than {PROMPT_PROGRAM_MIN} tokens where the backend computes the "
                        "engine's numerics, else passes")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (prompt_ids, tokens, text, stop_reason, ms_per_token) at the end")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("compile", help="compile the model into an instruction Program; print its summary")
    p.add_argument("--model", default=DEFAULT_MODEL, help=MODEL_HELP)
    p.add_argument("--program", default="target", choices=["target", "mtp", "mtp-chained", "prompt", "mtp-prompt"],
                   help="target forward (M > 1: verify passes), the MTP draft pass reading the target's hidden "
                        "rows or its own previous hidden (chained), a prompt chunk or the MTP head's prefill over "
                        "one (docs/ISA.md 'Prompt programs')")
    p.add_argument("--rows", type=int, default=1,
                   help=f"rows M per pass, 1..{MAX_ROWS}; a prompt chunk's most rows, 1..{PROMPT_MAX_ROWS}")
    p.add_argument("--sms", type=int, default=132, help="blocks G (one per SM; the H200 has 132)")
    p.add_argument("--context", type=int, default=4096, help="KV capacity in tokens")
    p.add_argument("--debug-logits", action="store_true", help="the head also writes fp32 logits")
    p.add_argument("--listing", action="store_true", help="print one line per instruction word")
    p.add_argument("--validate", action="store_true", help="prove the Program race- and deadlock-free for G blocks")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--full-json", action="store_true", help="with --json: every word, buffer and weight too")
    p.add_argument("--out", help="write the Program bytes (exactly what the GPU reads) to this file")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("trace", help="run the megakernel with its trace on (GPU): Perfetto JSON, per-opcode table, "
                                     "timeline PNG")
    p.add_argument("--model", default=DEFAULT_MODEL, help=MODEL_HELP)
    p.add_argument("--steps", type=int, default=4, help="passes traced (one launch)")
    p.add_argument("--context", type=int, default=1024, help="context the passes run at")
    p.add_argument("--token", type=int, default=9707, help="the first pass's input token")
    p.add_argument("--out", required=True, help="Chrome / Perfetto trace JSON (gzipped when it ends in .gz)")
    p.add_argument("--records", help="also save the raw records (.npz) with the model, context and capacity")
    p.add_argument("--plot", help="timeline PNG of the first traced pass (blocks x time, waits vs work)")
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser("bench", help="A/B of the GPU backends, interleaved on one session (GPU): results JSON, plot")
    p.add_argument("--model", default=DEFAULT_MODEL, help=MODEL_HELP)
    p.add_argument("--backends", default="megakernel,graph,eager", help="comma list of " + ", ".join(BENCH_BACKENDS))
    p.add_argument("--contexts", default="1024,4096,32768", help="comma list of contexts")
    p.add_argument("--tokens", type=int, default=32, help="timed passes per backend per round")
    p.add_argument("--rounds", type=int, default=5, help="rounds (the ratio's spread is over rounds)")
    p.add_argument("--token", type=int, default=9707, help="the first pass's input token")
    p.add_argument("--out", required=True, help="results JSON (docs/RESULTS_FILES.md: steps, ratio_megakernel_over_graph)")
    p.add_argument("--plot", help="per-token latency over the run for each backend (PNG); with --spec-k: pass "
                                  "cost against rows and tokens/s against the acceptance rate")
    p.add_argument("--spec-k", type=int, default=0,
                   help="benchmark speculative decoding with K drafts instead "
                        "(megakernel/measurement/specbench.py): pass "
                        "costs at the first --contexts value, --tokens greedy tokens per run, time to first token")
    p.add_argument("--prompt-tokens", type=int, default=128, help="with --spec-k: the decode runs' prompt length")
    p.add_argument("--ttft", default=None,
                   help="time to first token at these prompt lengths (comma list) through each --prompt-paths, "
                        "a prompt chunk's profile and the prompt GEMMs' TFLOP/s (megakernel/measurement/"
                        f"ttftbench.py); with --spec-k: its prompt lengths (default {SPEC_TTFT})")
    p.add_argument("--prompt-paths", default="program,passes",
                   help="with --ttft: the prompt paths timed (comma list of program, passes)")
    p.add_argument("--prompt-chunk", type=int, default=PROMPT_CHUNK, help="with --ttft: the prompt program's chunk rows")
    p.add_argument("--iters", type=int, default=None,
                   help=f"with --spec-k: timed repetitions of each pass kind (default {SPEC_ITERS}); with --ttft: "
                        f"of each prompt (default {TTFT_REPEATS})")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("tokenize", help="text -> token ids (the real Qwen3.5 tokenizer)")
    p.add_argument("text")
    p.add_argument("--json", action="store_true", help="print ids and pieces as JSON")
    p.add_argument("--no-special", action="store_true", help="treat special-token strings as plain text")
    p.add_argument("--tokenizer", default=None, help="checkpoint directory whose tokenizer.json to use")
    p.set_defaults(func=cmd_tokenize)

    p = sub.add_parser("detokenize", help="token ids -> text")
    p.add_argument("ids", nargs="+", type=int)
    p.add_argument("--tokenizer", default=None, help="checkpoint directory whose tokenizer.json to use")
    p.set_defaults(func=cmd_detokenize)
    return parser


class Terminated(BaseException):
    """SIGTERM, raised where the command is, so that its cleanups run (make-checkpoint removes its
    partial folder) before the exit; a BaseException, as KeyboardInterrupt is, so no handler keeps it."""


def _terminate(signum, frame):
    raise Terminated


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help, --version (0) and argument errors (2, one line on stderr)
        return e.code if isinstance(e.code, int) else 0 if e.code is None else 2
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread (an embedding application): its signals stay its own
        previous = None
    try:
        return _run(args)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace) -> int:
    try:
        status = args.func(args) or 0
        sys.stdout.flush()  # here, not at exit: a reader that went away is seen below
    except MegakernelError as e:
        print(f"megakernel: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as a tool killed by SIGPIPE
        _silence_stdout()
        return CLOSED_PIPE_STATUS
    except KeyboardInterrupt:  # Ctrl-C: one line, the status a shell gives an interrupted command
        print("megakernel: interrupted", file=sys.stderr)
        return INTERRUPTED_STATUS
    except Terminated:
        print("megakernel: terminated", file=sys.stderr)
        return TERMINATED_STATUS
    return status


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush of what is still buffered for the
    closed pipe cannot raise again at exit (Python's documented recipe for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (stdout replaced in-process): nothing to flush
        pass
