"""pyproject.toml is the source of truth; environment.yml, the Makefile and CI follow it."""

import re

import tomllib
import yaml

from kdtree_lab.core.paths import ROOT

REQUIRED = ["jupyterlab", "torch", "triton", "ipywidgets", "matplotlib", "papermill", "nbformat", "pyyaml",
            "pyelftools"]


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _names(reqs):
    return {re.split(r"[<>=!;\[ ]", r, maxsplit=1)[0].strip().lower() for r in reqs}


def test_required_dependencies_are_declared():
    project = _pyproject()["project"]
    declared = _names(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        declared |= _names(extra)
    assert not [r for r in REQUIRED if r not in declared], declared


def test_torch_floor_admits_the_cpu_wheel():
    deps = _pyproject()["project"]["dependencies"]
    torch_req = next(d for d in deps if d.startswith("torch"))
    assert ">=2.7" in torch_req


def test_environment_yml_is_a_thin_bootstrap_of_pyproject_extras():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "conda-forge" in env["channels"]
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    assert sorted(re.split(r"[=<>]", d)[0] for d in conda) == ["pip", "python"], conda
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert len(pip) == 1 and pip[0].startswith("-e ."), pip
    extras = set(re.search(r"\[(.*)\]", pip[0]).group(1).split(","))
    assert extras <= set(_pyproject()["project"]["optional-dependencies"]), extras


def test_console_script_and_make_targets():
    assert _pyproject()["project"]["scripts"]["kdtree-lab"] == "kdtree_lab.cli.main:main"
    makefile = (ROOT / "Makefile").read_text()
    for target in ("run:", "test:", "lab:"):
        assert re.search(rf"^{target}", makefile, re.M), target
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def _make_venv_dry_run(tmp_path, env):
    import os
    import subprocess

    base = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    out = subprocess.run(["make", "-n", "-B", "venv", f"VENV={tmp_path / 'v'}"], capture_output=True, text=True,
                         cwd=ROOT, env={**base, **env}, check=True)
    return next(line for line in out.stdout.splitlines() if "pip install --quiet torch==" in line)


def test_make_venv_takes_pytorchs_cpu_index_without_a_mirror(tmp_path):
    line = _make_venv_dry_run(tmp_path, {"PIP_CONFIG_FILE": "/dev/null"})
    assert "--index-url https://download.pytorch.org/whl/cpu" in line


def test_make_venv_keeps_a_configured_wheel_mirror(tmp_path):
    line = _make_venv_dry_run(tmp_path, {"PIP_CONFIG_FILE": "/dev/null", "PIP_FIND_LINKS": "/opt/wheels"})
    assert "--index-url" not in line
    assert "--index-url https://example.invalid/cpu" in _make_venv_dry_run(
        tmp_path, {"PIP_CONFIG_FILE": "/dev/null", "TORCH_INDEX": "https://example.invalid/cpu"})


def test_the_device_wheels_cover_the_runtime_dependencies():
    """Every runtime dependency of the package is on the lent GPU: in its image or among the wheels
    scripts/fetch_wheels.sh downloads for it (nbconvert was missing once: the run's index.html failed there)."""
    import re
    import tomllib

    from kdtree_lab.core.paths import ROOT

    script = (ROOT / "scripts" / "fetch_wheels.sh").read_text()
    arrays = {name: set(body.split()) for name, body in re.findall(r"^(IMAGE_HAS|PKGS)=\(([^)]*)\)", script, re.M)}
    have = {n.split("==")[0].lower().replace("_", "-") for n in arrays["IMAGE_HAS"] | arrays["PKGS"]}
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=;\[ ]", d, maxsplit=1)[0].lower().replace("_", "-") for d in deps}
    assert names <= have, sorted(names - have)
