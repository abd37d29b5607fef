"""Where work runs: how many CPU threads torch uses (the one place the library and its
commands set it), which device a setting names, and what the CPU is.

torch runs one operation on several threads (intra-op parallelism). The commands take a
``--threads`` option; tests and small models use one thread, where starting and joining more
costs more than it saves.
"""
from __future__ import annotations

import functools
import os
import platform
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, Optional, Tuple, Union

import torch

from .checks import require_count


#: The most torch threads set_threads takes for each CPU: a few more threads than CPUs may
#: overlap a stall; thousands more make OpenMP fail to create them and end the process.
MAX_THREADS_PER_CPU = 8


def set_threads(n: Optional[int], what: str = "threads") -> int:
    """Use ``n`` torch threads from now on; None or 0 keeps torch's current setting.

    Returns the number of threads in use afterwards. A negative ``n``, or more than
    :data:`MAX_THREADS_PER_CPU` times this machine's CPUs, is a ValueError; one that is not an
    integer a TypeError. ``what`` names the setting in the message (the CLI's ``--threads``).
    """
    if n is not None and require_count(what, n, least=0):
        cpus = os.cpu_count() or 1
        if n > MAX_THREADS_PER_CPU * cpus:  # (a million aborted the process in OpenMP, or segfaulted)
            raise ValueError(f"{what}: {n} is more than {MAX_THREADS_PER_CPU} per CPU of this machine's "
                             f"{cpus}; more threads than CPUs only wait for each other")
        torch.set_num_threads(n)
    return torch.get_num_threads()


@contextmanager
def threads(n: Optional[int]) -> Iterator[int]:
    """Run the block with ``n`` torch threads (None or 0: unchanged), then restore the previous
    number, also when the block raises. Yields the number in use inside the block."""
    before = torch.get_num_threads()
    try:
        yield set_threads(n)
    finally:
        torch.set_num_threads(before)


#: The variables torchrun sets for each process, and their values when a process runs alone.
LAUNCH_VARIABLES = {"RANK": 0, "WORLD_SIZE": 1, "LOCAL_RANK": 0}


def launch_env() -> Tuple[int, int, int]:
    """(rank, world size, local rank) as torchrun sets them (``RANK``, ``WORLD_SIZE``,
    ``LOCAL_RANK``); (0, 1, 0) for a process run alone.

    A value that is not a whole number (``WORLD_SIZE=`` left empty by a shell script), a world
    size under 1, a negative rank or a rank outside the world is a ValueError naming the
    variable: ``int()`` said only "invalid literal for int() with base 10: ''"."""
    values = {}
    for name, alone in LAUNCH_VARIABLES.items():
        raw = os.environ.get(name)
        try:
            values[name] = alone if raw is None else int(raw)
        except ValueError:
            raise ValueError(f"{name}={raw!r} in the environment is not a whole number (torchrun sets "
                             f"it for each process; unset it to run one process alone)") from None
    rank, world, local = values["RANK"], values["WORLD_SIZE"], values["LOCAL_RANK"]
    if world < 1 or not 0 <= rank < world or local < 0:
        raise ValueError(f"RANK={rank}, WORLD_SIZE={world}, LOCAL_RANK={local} in the environment: "
                         f"expected 0 <= RANK < WORLD_SIZE and LOCAL_RANK >= 0 (torchrun sets them "
                         f"for each process; unset them to run one process alone)")
    return rank, world, local


def resolve_device(device: "str | torch.device" = "auto", local_rank: Optional[int] = 0,
                   what: str = "--device") -> torch.device:
    """``auto``: this rank's GPU when CUDA is present, else the CPU. ``device`` may also be a
    :class:`torch.device`. ``cuda`` without an index is ``cuda:LOCAL_RANK``, or with
    ``local_rank=None`` torch's current CUDA device (what ``module.to("cuda")`` takes).

    A name torch does not know, a CUDA device this machine does not have, another backend that
    this PyTorch cannot use here (``mps``, ``xpu``, ``xla``, ...) or ``meta`` (which holds no
    values: a model moved there loses its weights) is a ValueError naming it, here rather than
    as a RuntimeError, AssertionError or ModuleNotFoundError from deep in torch at the first
    tensor moved there. So is a local rank at or past the GPUs for ``auto`` or a bare ``cuda``
    (more processes than GPUs under torchrun), rather than two ranks sharing one GPU. ``what``
    names the setting in the message.
    """
    auto = isinstance(device, str) and device == "auto"
    if auto and not torch.cuda.is_available():
        return torch.device("cpu")
    try:
        dev = torch.device(f"cuda:{local_rank or 0}" if auto else device)
    except (RuntimeError, TypeError):
        raise ValueError(f"{what} {device!r}: expected cpu, cuda, cuda:N or auto") from None
    ranks = auto or (dev.type == "cuda" and dev.index is None and local_rank is not None)
    if ranks and not auto:
        dev = torch.device(f"cuda:{local_rank}")
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (dev.index or 0) >= count:
            if count and ranks and local_rank:
                # (more processes than GPUs: two ranks on one GPU, silently, halve each one's
                # memory and speed; a GPU named cuda:N is the user's choice, shared or not)
                where = (f"local rank {local_rank} (LOCAL_RANK) but this machine has {count} CUDA "
                         f"device(s): start at most {count} processes on it (torchrun --nproc_per_node "
                         f"{count}), or name a device (cuda:N or cpu)")
            elif count:
                where = f"this machine has {count} CUDA device(s); use cpu or auto"
            elif torch.version.cuda is None:   # (a GPU user with the CPU wheel: say what to change)
                where = (f"this PyTorch ({torch.__version__}) is built without CUDA; use cpu or "
                         f"auto, or install a CUDA build of torch")
            else:
                where = "CUDA is not available here; use cpu or auto"
            raise ValueError(f"{what} {device}: {where}")
    elif dev.type == "meta":
        raise ValueError(f"{what} {device}: the meta device holds no values (a model moved there "
                         f"loses its weights); use cpu, cuda or auto")
    elif dev.type != "cpu":
        try:  # each backend fails its own way: AssertionError, RuntimeError, ModuleNotFoundError
            torch.empty(0, device=dev)
        except Exception:
            raise ValueError(f"{what} {device}: this PyTorch ({torch.__version__}) cannot put "
                             f"tensors on {dev.type} here; use cpu, cuda or auto") from None
    return dev


def _first_processor(cpuinfo: Union[str, Path]) -> Dict[str, str]:
    """The ``key: value`` fields of the first processor in ``cpuinfo`` (Linux's
    /proc/cpuinfo format); empty where the file cannot be read."""
    fields: Dict[str, str] = {}
    try:
        first = Path(cpuinfo).read_text(encoding="utf-8", errors="replace").split("\n\n")[0]
    except OSError:
        return fields
    for line in first.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_model(cpuinfo: Union[str, Path] = "/proc/cpuinfo") -> str:
    """The CPU's model name with its family and model numbers ("AMD EPYC (family 25 model 1)":
    virtual machines often report only a generic name), read from the first processor in
    ``cpuinfo`` on Linux; elsewhere, or when the file names no model, ``platform.processor()``
    or "unknown"."""
    fields = _first_processor(cpuinfo)
    name = fields.get("model name")
    if not name:
        return platform.processor() or "unknown"
    if fields.get("cpu family") and fields.get("model"):
        name += f" (family {fields['cpu family']} model {fields['model']})"
    return name


@functools.lru_cache(maxsize=None)
def cpu_vendor(cpuinfo: Union[str, Path] = "/proc/cpuinfo") -> str:
    """The CPU vendor's id string ("GenuineIntel", "AuthenticAMD", ...) of the first processor
    in ``cpuinfo`` on Linux; elsewhere, or when the file names none, "unknown"."""
    return _first_processor(cpuinfo).get("vendor_id") or "unknown"


def cpu_multiplies_bfloat16() -> Optional[bool]:
    """Whether this CPU multiplies bfloat16 natively for PyTorch: it has AVX512-BF16 or AMX,
    and oneDNN (which runs bfloat16 products on the CPU) may use them (``ONEDNN_MAX_CPU_ISA``
    below AVX512 turns them off). Without that, bfloat16 products are converted to float32
    and back, and run slower than float32's. None where this PyTorch cannot tell."""
    try:
        hardware = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
        return bool(hardware and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):   # (private probes: absent or failing in some builds)
        return None


def machine_description() -> Dict[str, object]:
    """What a measurement ran on, for results files and benchmark headers: the CPU model, the
    vector instructions torch's kernels use on it (``ATEN_CPU_CAPABILITY`` lowers them), the
    cores this process may use, torch's threads, the software versions, and which library runs
    the highway's products (:func:`elmo.modules.dense.cpu_products`). Speed figures from
    different CPUs are not comparable, so every recorded figure names its CPU."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 0
    from .modules.dense import cpu_products  # here: the modules import this one
    return {"cpu": cpu_model(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "cores": cores, "threads": torch.get_num_threads(), "platform": platform.platform(),
            "python": platform.python_version(), "torch": torch.__version__,
            "highway_products": cpu_products()}
