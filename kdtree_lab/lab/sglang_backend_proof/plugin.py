"""The hook installed the way ``sglang serve`` installs it: SGLang's ``load_plugins`` finds kdtree-lab's
``sglang.srt.plugins`` entry point (published from pyproject.toml when kdtree-lab is not pip-installed) and applies
its AFTER hook on ``TritonAttnBackend.__init__``."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
from pathlib import Path
from types import SimpleNamespace

from ...core.paths import ROOT
from ...sglang import hook as hook_module
from ...sglang import serve
from .settings import ProofError


def entry_point() -> tuple[str, str]:
    """kdtree-lab's ``sglang.srt.plugins`` entry point as pyproject.toml declares it: (name, 'module:function')."""
    import tomllib

    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["sglang.srt.plugins"]
    (name, value), = eps.items()
    return name, value


def publish_entry_point(workdir: Path, group: str, name: str, value: str,
                        dist: str = "kdtree-lab-checkout") -> list:
    """Make entry point ``name = value`` of ``group`` visible to importlib.metadata as an installed distribution
    ``dist`` would (a dist-info directory under ``workdir``, put on sys.path); returns what importlib.metadata then
    finds. Raises ProofError where it finds nothing."""
    info = workdir / f"{dist.replace('-', '_')}-0.0.0+checkout.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.0.0+checkout\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n{name} = {value}\n")
    if str(workdir) not in sys.path:
        sys.path.append(str(workdir))
    importlib.invalidate_caches()
    found = [ep for ep in importlib.metadata.entry_points(group=group) if ep.name == name]
    if not found:
        raise ProofError(f"importlib.metadata does not find the {name} entry point published in {info}")
    return found


def load_hook_plugin(sg: SimpleNamespace, workdir: Path) -> dict:
    """Install the hook the way ``sglang serve`` does: SGLang's ``load_plugins`` discovers kdtree-lab's entry point
    and applies the AFTER hook it registers on ``TritonAttnBackend.__init__``. From a source checkout (kdtree-lab
    not pip-installed) the entry point pyproject.toml declares is published first as a dist-info directory on
    sys.path, where importlib.metadata (and so SGLang) finds installed packages. KDTREE_VERIFY must not be off
    while the plugin runs (it registers nothing then)."""
    name, value = entry_point()
    found = [ep for ep in importlib.metadata.entry_points(group=sg.GENERAL_PLUGINS_GROUP) if ep.name == name]
    source = "installed"
    if not found:
        found = publish_entry_point(workdir, sg.GENERAL_PLUGINS_GROUP, name, value)
        source = "pyproject.toml (published as a dist-info on sys.path)"
    if found[0].value != value:
        raise ProofError(f"the installed {name} entry point is {found[0].value!r}, pyproject.toml declares {value!r}")
    if hook_module.parse_mode() == "off":
        os.environ[hook_module.ENV_VAR] = "on"
    allowed = os.environ.get("SGLANG_PLUGINS")
    if allowed and name not in allowed.split(","):
        raise ProofError(f"SGLANG_PLUGINS={allowed!r} excludes the {name} plugin")
    sg.load_plugins()
    registered = [h for _, h, _ in sg.HookRegistry._hooks.get(serve.TARGET, [])]
    if serve.after_backend_init not in registered or serve.TARGET not in sg.HookRegistry._patched:
        raise ProofError(f"SGLang's load_plugins did not apply the {name} plugin's AFTER hook on {serve.TARGET} "
                         f"(registered: {registered}, patched: {sorted(sg.HookRegistry._patched)})")
    return {"entry_point": f"{name} = {value}", "source": source, "target": serve.TARGET, "hook": "AFTER"}
