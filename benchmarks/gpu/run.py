"""The GPU session's measurements, in one process (called by benchmarks/gpu/run.sh).

    python benchmarks/gpu/run.py --out DIR [--smoke] [--minutes M] [--corpus FILE] [--budget-s S]

Phases, each timed with the device synchronised, implementations in alternating rounds (medians):

1. inference: the original configuration (2 x 4096 cells, projection 512, 2048 filters; random
   weights) at batch 1, 32 and 128 in fp32, bf16 (the model converted) and int8 recurrent
   weights where the device supports them, against the plain per-timestep reference
   (benchmarks/reference.py) in fp32; deviations from fp32 are reported;
2. the per-step loop at batch 1 and 32 (one layer of the original): the eager step as the library
   runs it, the same steps replayed from a CUDA graph, the cell compiled with torch.compile, and
   cuDNN's LSTM with a projection (which has no cell or projection clipping, so it can only serve
   models trained without clipping; timed as the bound a fused kernel could reach);
3. one training step (forward, backward, clip, optimizer) of the released "small" configuration
   and of the bundled default model, batch 128 x 20, fp32 and bf16 autocast, with the peak
   device memory of each (torch.cuda.max_memory_allocated: weights, optimizer state, step);
4. training the bundled default model from its shipped weights for ``--minutes`` on the device
   (Adam 5e-4, 2048 negatives, batch 128 x 20: its original settings), held-out perplexity
   before and after, and the result written in the shipped form (float32 biLM, float16 softmax).

Writes into ``--out``: results.json, RESULTS.md and model/ (5 files); run.sh adds run.log.
``--smoke`` does all of it on the CPU at a tiny size, in seconds, with the CPU's autocast casting
as CUDA's does (tests/cuda_autocast.py), so that the bf16 steps fail there as they would on a GPU.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import random
import statistics
import sys
import tempfile
import time

#: When this process began its imports: the budget counts from here, as run.sh's timeout does
#: (torch's own import, with its CUDA libraries, can take many seconds on a fresh machine).
STARTED = time.monotonic()

from pathlib import Path  # noqa: E402
from typing import Callable, Dict, List, Optional  # noqa: E402

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import elmo.modules.lstm as lstm_module  # noqa: E402
from benchmarks.common import CONFIGS  # noqa: E402
from benchmarks.reference import ReferenceBiLM  # noqa: E402
from elmo import BiLM, ElmoOptions, batch_to_ids  # noqa: E402
from elmo.modules.lstm_inference import int8_supported  # noqa: E402
from elmo.runtime import machine_description  # noqa: E402

DEFAULT_MODEL = ROOT / "elmo" / "resources" / "default"
DEMO_TEXT = ROOT / "elmo" / "resources" / "demo" / "play_sentences.txt"
TINY = {"lstm": {"dim": 16, "projection_dim": 8, "n_layers": 2, "cell_clip": 3, "proj_clip": 3,
                 "use_skip_connections": True},
        "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8]], "n_highway": 1,
                     "n_characters": 262, "max_characters_per_token": 50, "activation": "relu"}}


def log(*parts) -> None:
    print(time.strftime("%H:%M:%S"), *parts, flush=True)


class Clock:
    """The session's time budget: phases ask how much is left. ``started``: when the budget
    began (a ``time.monotonic()`` reading; default now)."""

    def __init__(self, seconds: float, started: Optional[float] = None):
        self.end = (time.monotonic() if started is None else started) + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak_memory(device: torch.device) -> None:
    """Start counting the device's peak memory afresh (CUDA only)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_mib(device: torch.device) -> Optional[float]:
    """The most memory tensors held on the device since :func:`reset_peak_memory`, in MiB
    (the caching allocator's reserve not counted); None off CUDA."""
    if device.type != "cuda":
        return None
    return round(torch.cuda.max_memory_allocated(device) / 2**20, 1)


def timed(fns: Dict[str, Callable[[], object]], device: torch.device, seconds: float,
          min_rounds: int = 3) -> Dict[str, float]:
    """Median seconds per call of each, in alternating rounds after one warm-up call each."""
    for fn in fns.values():
        fn()
    sync(device)
    runs: Dict[str, List[float]] = {n: [] for n in fns}
    names, start, rounds = list(fns), time.perf_counter(), 0
    while rounds < min_rounds or time.perf_counter() - start < seconds:
        for name in (names if rounds % 2 == 0 else names[::-1]):
            t = time.perf_counter()
            fns[name]()
            sync(device)
            runs[name].append(time.perf_counter() - t)
        rounds += 1
    return {n: statistics.median(r) for n, r in runs.items()}


def random_model(options: dict, seed: int = 0) -> BiLM:
    torch.manual_seed(seed)
    bilm = BiLM(ElmoOptions.from_dict(options))
    with torch.no_grad():
        for p in bilm.parameters():
            p.uniform_(-0.05, 0.05)
        bilm.token_encoder.char_embedding.weight[0].zero_()
    return bilm.eval().requires_grad_(False)


def sentences_from(path: Path, limit: Optional[int] = None) -> List[List[str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    out = [line.split() for line in lines if line.split()]
    return out[:limit] if limit else out


def full_float32() -> dict:
    """Float32 means float32 in every phase; returns the settings in force, for the report.

    cuDNN runs float32 convolutions and RNNs in TF32 by default. The library turns TF32 off for
    its own forward convolutions only; the reference's convolutions, cuDNN's LSTM and the
    convolutions' backward in training would otherwise run in TF32, off by ~1e-3 and faster
    than the float32 they are compared with. (The old flag: it sets both per-operator flags.)
    Matrix products are full float32 by default, but not where TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1
    (set in NVIDIA's PyTorch images) starts the process in TF32: the precision is set here too.
    """
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return {"cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            **{name: os.environ.get(name, "unset") for name in TF32_ENVIRONMENT}}


#: Variables that turn TF32 on behind the process's back (run.sh sets both to 0).
TF32_ENVIRONMENT = ("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "NVIDIA_TF32_OVERRIDE")


#: Whether inputs are copied from pinned host memory (turned off where pinning fails).
PINNED = True


def to_device(ids: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Pinned host memory lets the copy overlap with the work already queued. Where pinning
    fails (a sandboxed driver may refuse page-locked memory) the copies are plain ones, for
    every implementation alike, rather than the whole inference phase failing."""
    global PINNED
    if device.type == "cuda" and PINNED:
        try:
            return ids.pin_memory().to(device, non_blocking=True)
        except RuntimeError as e:
            PINNED = False
            log(f"pinned host memory unavailable, plain copies from now on: {e}"[:300])
    return ids.to(device)


# ---------------------------------------------------------------------- 1. inference
def inference(device, smoke: bool, clock: Clock, rows: List[dict]) -> List[dict]:
    """Appends to ``rows`` as it measures, so that a later failure keeps the earlier rows."""
    options = TINY if smoke else CONFIGS["original"]
    bilm = random_model(options).to(device)
    reference = ReferenceBiLM(bilm)
    bf16 = copy.deepcopy(bilm).to(torch.bfloat16)
    int8 = None
    if int8_supported(device):
        int8 = copy.deepcopy(bilm)
        int8.lstm.use_int8()
    text = sentences_from(DEMO_TEXT)
    for bs in ([1, 2] if smoke else [1, 32, 128]):
        if clock.left() < 60 and not smoke:
            log(f"inference: skipping batch {bs}, out of time")
            continue
        n = (2 if smoke else 16) if bs == 1 else 2 * bs
        batches = [text[i:i + bs] for i in range(0, n, bs)]
        chunks = [batch_to_ids(b) for b in batches]
        tokens = sum(len(s) for s in text[:n])

        def runner(model, general=False):
            def go():
                lstm_module.SINGLE_SEQUENCE_PATH = not general
                try:
                    with torch.no_grad():
                        for c in chunks:
                            model(to_device(c, device))
                finally:
                    lstm_module.SINGLE_SEQUENCE_PATH = True
            return go

        def ref():
            for c in chunks:
                reference(to_device(c, device))

        impls = {"reference": ref, "elmo": runner(bilm), "elmo-bf16": runner(bf16)}
        if bs == 1:
            impls["elmo-general-path"] = runner(bilm, general=True)
        if int8 is not None:
            impls["elmo-int8"] = runner(int8)
        with torch.no_grad():
            first = to_device(chunks[0], device)
            exact = bilm(first)["activations"]
            deviations = {"reference": max(float((a - b).abs().max()) for a, b in zip(exact, reference(first))),
                          "elmo-bf16": [float((a.float() - b).abs().max()) for a, b in zip(bf16(first)["activations"], exact)]}
            if int8 is not None:
                try:  # the opt-in int8 kernel differs from device to device: its failure drops it alone
                    deviations["elmo-int8"] = [float((a - b).abs().max())
                                               for a, b in zip(int8(first)["activations"], exact)]
                except Exception as e:  # noqa: BLE001  (a measurement, not a feature: report and go on)
                    rows.append({"batch": bs, "impl": "elmo-int8", "error": f"{type(e).__name__}: {e}"[:300]})
                    log(f"inference batch {bs}: elmo-int8 failed, left out: {rows[-1]['error']}")
                    int8 = None
                    del impls["elmo-int8"]
        times = timed(impls, device, seconds=0 if smoke else 8, min_rounds=1 if smoke else 3)
        for name, t in times.items():
            rows.append({"batch": bs, "impl": name, "tok_s": tokens / t, "vs_reference": times["reference"] / t})
            log(f"inference batch {bs:>3} {name:>18}: {tokens / t:10.1f} tok/s  {times['reference'] / t:6.2f}x")
        rows.append({"batch": bs, "impl": "max |deviation| from elmo fp32", **deviations})
        log(f"inference batch {bs} deviations: {deviations}")
    return rows


# ---------------------------------------------------------------------- 2. the per-step loop
def step_loop(device, smoke: bool, clock: Clock, rows: List[dict]) -> List[dict]:
    """Microseconds per time step of one layer (both directions) at batch 1 and 32, appended to
    ``rows`` as measured."""
    lstm = (TINY if smoke else CONFIGS["original"])["lstm"]
    cells, proj = lstm["dim"], lstm["projection_dim"]
    clip = float(lstm["cell_clip"])
    g = torch.Generator().manual_seed(0)
    w_hh = (torch.rand(2, proj, 4 * cells, generator=g) * 0.1 - 0.05).to(device)
    w_proj = (torch.rand(2, cells, proj, generator=g) * 0.1 - 0.05).to(device)
    steps = 32

    def cell(x, h, c):
        gates = torch.bmm(h, w_hh) + x
        i, j, f, o = gates.chunk(4, dim=-1)
        c = (torch.sigmoid(i) * torch.tanh(j) + torch.sigmoid(f) * c).clamp(-clip, clip)
        h = torch.bmm(torch.sigmoid(o) * torch.tanh(c), w_proj).clamp(-clip, clip)
        return h, c

    for bs in (1, 32):
        if clock.left() < 45 and not smoke:
            break
        xs = torch.rand(steps, 2, bs, 4 * cells, generator=g).to(device)
        h0, c0 = torch.zeros(2, bs, proj, device=device), torch.zeros(2, bs, cells, device=device)

        def eager(fn=cell):
            h, c = h0, c0
            with torch.no_grad():
                for t in range(steps):
                    h, c = fn(xs[t], h, c)
            return h

        impls: Dict[str, Callable[[], object]] = {"eager": eager}
        notes = {}
        if device.type == "cuda":
            try:  # the whole 32-step loop captured once, replayed as one launch
                static_out = None
                side = torch.cuda.Stream(device)
                side.wait_stream(torch.cuda.current_stream(device))
                with torch.cuda.stream(side):
                    eager()
                torch.cuda.current_stream(device).wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    static_out = eager()
                impls["cuda-graph"] = graph.replay
                del static_out
            except Exception as e:  # noqa: BLE001  (a measurement, not a feature: report and go on)
                notes["cuda-graph"] = f"failed: {type(e).__name__}: {e}"[:300]
        if not smoke and clock.left() > 120:
            try:
                compiled = torch.compile(cell, dynamic=False)
                t0 = time.perf_counter()
                eager(compiled)
                sync(device)
                notes["torch.compile"] = f"compiled in {time.perf_counter() - t0:.1f} s"
                impls["torch.compile"] = lambda: eager(compiled)
            except Exception as e:  # noqa: BLE001
                notes["torch.compile"] = f"failed: {type(e).__name__}: {e}"[:300]
        # cuDNN (or the CPU kernel): no cell/projection clipping, one direction at a time
        rnn = torch.nn.LSTM(proj, cells, proj_size=proj).to(device).eval()
        seq = torch.rand(steps, bs, proj, generator=g).to(device)

        def fused():
            with torch.no_grad():
                for _ in range(2):
                    rnn(seq)
        impls["cudnn-lstm (no clipping)"] = fused
        times = timed(impls, device, seconds=0 if smoke else 4, min_rounds=1 if smoke else 3)
        for name, t in times.items():
            us = 1e6 * t / steps
            rows.append({"batch": bs, "impl": name, "us_per_step": us, "note": notes.get(name, "")})
            log(f"step loop batch {bs:>3} {name:>26}: {us:9.1f} us/step")
        for name, note in notes.items():
            if name not in times:
                rows.append({"batch": bs, "impl": name, "us_per_step": None, "note": note})
                log(f"step loop batch {bs} {name}: {note}")
    return rows


# ---------------------------------------------------------------------- 3. a training step
def random_lm_batch(words: List[str], rows: int, steps: int, max_chars: int, g: random.Random):
    from elmo.chars import word_to_char_ids
    from elmo.data.lm_batches import LMBatch
    ids = torch.tensor([[g.randrange(3, len(words)) for _ in range(steps + 1)] for _ in range(rows)])
    table = {}
    for i in ids.unique().tolist():
        table[i] = word_to_char_ids(words[i], max_chars)
    chars = torch.tensor([[table[i] for i in row] for row in ids.tolist()])
    mask = torch.ones(rows, steps, dtype=torch.bool)
    return LMBatch(fwd_chars=chars[:, :steps], bwd_chars=chars[:, 1:].flip(1), fwd_targets=ids[:, 1:],
                   bwd_targets=ids[:, :steps].flip(1), fwd_mask=mask, bwd_mask=mask.clone(),
                   lengths=torch.full((rows,), steps, dtype=torch.long)).keep_host_lengths([steps] * rows)
    # (as the trainer's batches: the LSTM's packing then reads no lengths from the GPU)


def train_steps(device, smoke: bool, clock: Clock, rows: List[dict]) -> List[dict]:
    """Seconds per training step of each configuration and mode, appended to ``rows`` as measured."""
    from elmo.modules.softmax import Candidates, LogUniformSampler
    from elmo.training.model import LanguageModel
    words = (DEFAULT_MODEL / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    default_opts = json.loads((DEFAULT_MODEL / "options.json").read_text())
    configs = ({"tiny": (TINY, 64)} if smoke else
               {"small": (CONFIGS["small"], 8192), "default": ({k: default_opts[k] for k in ("lstm", "char_cnn")}, 2048)})
    rows_, steps_ = (4, 5) if smoke else (128, 20)
    for name, (options, n_neg) in configs.items():
        for bf16 in (False, True):
            if clock.left() < 60 and not smoke:
                break
            # the previous run's model, optimizer state and batches go before this one's peak is counted
            model = opt = batches = state = None
            reset_peak_memory(device)
            torch.manual_seed(0)
            model = LanguageModel(ElmoOptions.from_dict(options), len(words), dropout=0.1).to(device).train()
            opt = torch.optim.Adam(model.parameters(), lr=5e-4)
            sampler = LogUniformSampler(len(words), seed=0)
            g = random.Random(0)
            batches = [random_lm_batch(words, rows_, steps_, 50, g).to(device) for _ in range(3)]
            state = [None]

            def step(i=[0]):
                batch = batches[i[0] % len(batches)]
                i[0] += 1
                with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16):
                    out = model(batch, state[0], Candidates.draw(sampler, n_neg, device))
                out["loss"].backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
                state[0] = out["state"]

            t = timed({"step": step}, device, seconds=0 if smoke else 6, min_rounds=1 if smoke else 3)["step"]
            mode = "bf16 autocast" if bf16 else "fp32"
            peak = peak_memory_mib(device)
            rows.append({"config": name, "mode": mode, "batch": f"{rows_} x {steps_}", "step_s": t,
                         "tok_s": rows_ * steps_ / t, "peak_mib": peak})
            log(f"train step {name:>8} {mode:>14}: {1e3 * t:8.1f} ms  {rows_ * steps_ / t:10.0f} tok/s"
                f"  peak {peak} MiB")
    return rows


# ---------------------------------------------------------------------- 4. a training run
#: Seconds the training phase needs besides the training itself: the model loaded, the
#: held-out perplexity before and after, the corpus counted, the result exported and shipped.
TRAIN_RESERVE_S = 75.0
#: The shortest training run worth its reserve.
TRAIN_MIN_S = 30.0


def training_seconds(clock: Clock, minutes: float, smoke: bool) -> Optional[float]:
    """Seconds to train: ``minutes``, less where the budget ends sooner; None where what is
    left cannot hold :data:`TRAIN_MIN_S` of training and the reserve (the phase is skipped
    rather than overrunning the budget and being killed by run.sh's timeout mid-run)."""
    if smoke:
        return 3.0
    left = clock.left() - TRAIN_RESERVE_S
    if left < TRAIN_MIN_S:
        return None
    return max(TRAIN_MIN_S, min(60 * minutes, left))


def training_run(device, smoke: bool, clock: Clock, minutes: float, corpus: Optional[str],
                 out: Path) -> dict:
    seconds = training_seconds(clock, minutes, smoke)
    if seconds is None:
        note = (f"skipped: {clock.left():.0f} s of the budget left, under the "
                f"{TRAIN_RESERVE_S + TRAIN_MIN_S:.0f} s a training run needs")
        log(f"training: {note}")
        return {"skipped": note}
    from elmo.training.evaluate import perplexity
    from elmo.training.export import load_language_model
    from elmo.training.ship import ship
    from elmo.training.config import TrainConfig
    from elmo.training.trainer import train
    brown = Path.home() / ".cache" / "elmo" / "brown" / "train.txt"   # elmo data get brown
    source = Path(corpus) if corpus else (brown if brown.exists() and not smoke else DEMO_TEXT)
    sentences = sentences_from(source)
    if smoke:
        sentences = sentences[:60]
    work = Path(tempfile.mkdtemp(prefix="elmo-gpu-"))
    train_file, valid_file = work / "train.txt", work / "valid.txt"
    held = sentences[9::10][:50 if smoke else 500]
    train_sentences = [s for i, s in enumerate(sentences) if i % 10 != 9]
    train_file.write_text("".join(" ".join(s) + "\n" for s in train_sentences))
    valid_file.write_text("".join(" ".join(s) + "\n" for s in held))
    base, vocab = load_language_model(DEFAULT_MODEL, device=device)
    before = perplexity(base, held, vocab, batch_size=32, device=device)
    del base
    batch, unroll = (4, 5) if smoke else (128, 20)
    cfg = TrainConfig(train=[str(train_file)], valid=[str(valid_file)], vocab=str(DEFAULT_MODEL / "vocab.txt"),
                      output=str(work / "run"), init_from=str(DEFAULT_MODEL), batch_size=batch,
                      unroll_steps=unroll, epochs=1000.0, max_seconds=seconds, optimizer="adam", lr=5e-4,
                      n_negative=64 if smoke else 2048, checkpoint_every=10 ** 9, log_every=50,
                      device=str(device), progress=False, seed=0,
                      metadata={"gpu_session": {"corpus": str(source), "heldout": "every 10th sentence"}})
    log(f"training from {DEFAULT_MODEL.name} on {source} ({len(sentences)} sentences) for {seconds:.0f} s")
    summary = train(cfg)
    sizes = ship(work / "run" / "model", out / "model", "float32", "float16", max_mb=40)
    result = {"corpus": str(source), "sentences": len(sentences), "heldout_sentences": len(held),
              "seconds": summary["elapsed_s"], "steps": summary["step"], "tokens": summary["tokens"],
              "tokens_per_s": summary["tokens_per_s"], "heldout_ppl_before": before.get("ppl"),
              "heldout_ppl_after": summary.get("valid", {}).get("ppl"), "shipped_bytes": sizes,
              # passes over the training text (words and one </S> a sentence): on the bundled demo
              # sample (16k words) minutes of GPU training are hundreds of passes, and a held-out
              # perplexity that rises says overfitting, not a broken trainer
              "epochs": round(summary["tokens"] / max(1, sum(len(s) + 1 for s in train_sentences)), 1)}
    log(f"training: {result}")
    return result


# ---------------------------------------------------------------------- report
def markdown(results: dict) -> str:
    lines = [f"# GPU session: {results['device']}", "",
             f"torch {results['torch']}, {results['when']}; tests: {results['tests']}", "",
             f"host CPU: {results['host']['cpu']}, {results['host']['cores']} cores", "",
             f"float32 settings: {results.get('float32')}", ""]
    # a phase that failed says so first (its rows up to the failure follow in their tables)
    lines += [f"**{k[:-len('_error')]} failed**: {v}" for k, v in results.items() if k.endswith("_error")]
    lines += [f"**{r['impl']} at batch {r['batch']} failed**: {r['error']}"
              for r in results.get("inference", []) if "error" in r]
    lines += ["", "## Inference (original configuration, random weights)", "",
             "| batch | implementation | tok/s | vs reference |", "|---|---|---|---|"]
    for r in results.get("inference", []):
        if "tok_s" in r:
            lines.append(f"| {r['batch']} | {r['impl']} | {r['tok_s']:.1f} | {r['vs_reference']:.2f}x |")
    devs = [r for r in results.get("inference", []) if "tok_s" not in r and "error" not in r]
    lines += ["", "Max |deviation| from elmo fp32 (per layer): " +
              "; ".join(f"batch {r['batch']}: " + ", ".join(f"{k} {v}" for k, v in r.items()
                                                          if k not in ("batch", "impl")) for r in devs)]
    lines += ["", "## Per-step loop (one layer, both directions)", "",
              "| batch | implementation | us per step | note |", "|---|---|---|---|"]
    for r in results.get("step_loop", []):
        us = "-" if r["us_per_step"] is None else f"{r['us_per_step']:.1f}"
        lines.append(f"| {r['batch']} | {r['impl']} | {us} | {r['note']} |")
    lines += ["", "## Training step", "", "| config | mode | batch | ms per step | tok/s | peak MiB |",
              "|---|---|---|---|---|---|"]
    for r in results.get("train_step", []):
        peak = "-" if r.get("peak_mib") is None else f"{r['peak_mib']:.0f}"
        lines.append(f"| {r['config']} | {r['mode']} | {r['batch']} | {1e3 * r['step_s']:.1f} | {r['tok_s']:.0f} "
                     f"| {peak} |")
    t = results.get("training")
    if t:
        lines += ["", "## Training the default model from its shipped weights", "",
                  "```", json.dumps(t, indent=2), "```"]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--out", required=True)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU, end to end")
    parser.add_argument("--minutes", type=float, default=3.0, help="training run length (default 3)")
    parser.add_argument("--corpus", help="tokenized text, one sentence a line (default: the Brown "
                        "standard form in ~/.cache/elmo if present, else the bundled demo sample)")
    parser.add_argument("--budget-s", type=float, default=470.0, help="seconds this script may take")
    parser.add_argument("--tests", default="not run", help="the CUDA tests' outcome, for the report")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    clock = Clock(args.budget_s, started=STARTED)
    if args.smoke:
        device = torch.device("cpu")
        torch.set_num_threads(1)
    elif not torch.cuda.is_available():
        print("no CUDA device: run with --smoke for the CPU check", file=sys.stderr)
        return 2
    else:
        device = torch.device("cuda")
        torch.set_num_threads(min(8, torch.get_num_threads()))
    float32 = full_float32()
    host = machine_description()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({host['cpu']})"
    results = {"device": name, "host": host, "torch": torch.__version__,
               "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "tests": args.tests, "smoke": args.smoke, "budget_s": args.budget_s,
               "float32": float32, "cpu_autocast_as_cudas": args.smoke}
    # the phases that measure rows append them as they go: a failure keeps those measured before it
    phases = [("inference", lambda rows: inference(device, args.smoke, clock, rows)),
              ("step_loop", lambda rows: step_loop(device, args.smoke, clock, rows)),
              ("train_step", lambda rows: train_steps(device, args.smoke, clock, rows)),
              ("training", lambda _: training_run(device, args.smoke, clock, args.minutes, args.corpus, out))]

    def save() -> None:
        (out / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
        (out / "RESULTS.md").write_text(markdown(results))

    save()  # the device and the tests' outcome, also if the first phase never returns
    with autocast_as_on_the_device(args.smoke):
        failed = run_phases(phases, results, save)
    return 1 if failed else 0


def autocast_as_on_the_device(smoke: bool):
    """The block's autocast as the GPU session's: with ``smoke``, the CPU's bf16 autocast casts
    as CUDA's does (tests/cuda_autocast.py), so that the CPU run fails where a GPU's would."""
    if not smoke:
        return contextlib.nullcontext()
    from tests.cuda_autocast import cpu_autocast_as_cudas
    return cpu_autocast_as_cudas()


def run_phases(phases, results: dict, save: Callable[[], None]) -> bool:
    """Each phase in turn, its rows (or its error) into ``results``, saved after each; whether
    one failed."""
    failed = False
    for key, phase in phases:
        t0 = time.perf_counter()
        rows: List[dict] = []
        try:
            results[key] = phase(rows)
        except Exception as e:  # noqa: BLE001  (later phases still run; the failure is reported)
            import traceback
            traceback.print_exc()
            results[key] = rows if key != "training" else {}
            results[f"{key}_error"] = f"{type(e).__name__}: {e}"
            failed = True
        results[f"{key}_wall_s"] = round(time.perf_counter() - t0, 1)
        # written after every phase, so a run cut short keeps what it measured
        save()
    return failed


if __name__ == "__main__":
    sys.exit(main())
