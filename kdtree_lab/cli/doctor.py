"""``kdtree-lab doctor``: what this machine has, and the profile it gets."""

from __future__ import annotations

import argparse

from ..lab.record import emit


def cmd_doctor(args: argparse.Namespace) -> int:
    from ..lab.doctor import collect, render
    from ..lab.profiles import auto_name

    env = collect()
    try:
        profile = auto_name(env.gpu_name, env.compute_capability)
    except ValueError as exc:
        profile = f"none ({exc})"
    data = env.as_dict() | {"profile": profile}
    emit(args, data, render(env, profile))
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001 - argparse has no public type
    p = sub.add_parser("doctor", help="python, torch, triton, CUDA, driver, nvcc archs, GPU, cuobjdump")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_doctor)
