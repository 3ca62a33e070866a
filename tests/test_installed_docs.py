"""`pip install .` puts the man pages where `man` finds them: <env>/share/man/man1, which man-db
reaches from <env>/bin on PATH (its PATH -> MANPATH mapping: for each directory on PATH it also
looks in ../share/man), so `man mqcli` and `man mqcli-put` work in an activated environment.

Installed for real into a fresh venv from a copy of the source tree (a build leaves build/ and
*.egg-info behind: never in the checkout other runs use)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("man") is None,
                       reason="man (man-db) is not installed; .ci/run installs it"),
]


def _copy_source(to: Path) -> Path:
    skip = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                                  ".pytest_cache", ".hypothesis", "results")
    shutil.copytree(ROOT, to, ignore=skip)
    return to


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("installed")
    src = _copy_source(tmp / "src")
    env_dir = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=120)
    # --no-deps: only this package's own files are under test; the build backend comes from
    # pip's configured index like any user's install
    proc = subprocess.run([str(env_dir / "bin" / "pip"), "install", "-q", "--no-deps", str(src)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return env_dir


def _man_env(env_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MANPATH", "MANOPT", "PAGER", "MANPAGER")}
    env["PATH"] = f"{env_dir / 'bin'}:/usr/local/bin:/usr/bin:/bin"
    env["MANWIDTH"] = "80"
    return env


def test_pip_install_puts_every_generated_page_in_share_man(installed):
    man1 = installed / "share" / "man" / "man1"
    assert (man1 / "mqcli.1").is_file()
    assert sorted(p.name for p in man1.glob("mqcli*.1")) == sorted(p.name for p in (ROOT / "man").glob("*.1"))
    assert (man1 / "mqcli-put.1").read_bytes() == (ROOT / "man" / "mqcli-put.1").read_bytes()


def test_installed_page_renders_with_man_l(installed):
    proc = subprocess.run(["man", "-l", str(installed / "share" / "man" / "man1" / "mqcli.1")],
                          capture_output=True, text=True, env=_man_env(installed), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "NAME" in proc.stdout and "mqcli" in proc.stdout and "SYNOPSIS" in proc.stdout


def test_man_finds_the_pages_from_the_venv_bin_on_path(installed):
    env = _man_env(installed)
    for page in ("mqcli", "mqcli-put"):
        proc = subprocess.run(["man", "-w", page], capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert Path(proc.stdout.strip()) == installed / "share" / "man" / "man1" / f"{page}.1"
    # and without the venv on PATH there is no page: the mapping is what found it
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    proc = subprocess.run(["man", "-w", "mqcli"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode != 0 or Path(proc.stdout.strip()).parent != installed / "share" / "man" / "man1"
