"""Build the control plane's binaries from their Go modules, once per release.

Everything comes from the Go module proxy: `k8s.io/kubernetes` at the release, with each of
its staging modules (which its go.mod points at `./staging/...`, a directory a module
download does not have) replaced by the published `v0.x` version of the same release; and
etcd from `go.etcd.io/etcd/server/v3`, whose `etcdmain.Main` is the whole etcd command.
The binaries land in the cache (`release.bin_dir`), outside the checkout; nothing is
committed and nothing is fetched from anywhere but the proxy.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from controlplane.release import BINARIES, COMPONENTS, Release, bin_dir, cache_root


class BuildError(RuntimeError):
    """One line naming the module or package that failed, and where the full log is."""


ETCD_MAIN = """package main

import (
\t"os"

\t"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
"""


def say(message: str) -> None:
    print(f"control plane: {message}", flush=True)


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    # The machine's Go builds 1.37 (its go.mod asks for 1.26.0): never fetch a toolchain.
    env.update({"GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"})
    return env


def _go(args: list[str], cwd: Path, log: Path, what: str) -> str:
    if shutil.which("go") is None:
        raise BuildError("the go command is not installed (Go 1.26 or newer is needed)")
    done = subprocess.run(
        ["go", *args], cwd=cwd, env=go_env(), capture_output=True, text=True, check=False
    )
    with log.open("a") as out:
        out.write(f"$ go {' '.join(args)}\n{done.stdout}{done.stderr}\n")
    if done.returncode != 0:
        raise BuildError(f"{what} failed: {failure_summary(done.stderr)} (full log: {log})")
    return done.stdout


_PACKAGE = re.compile(r"^# (\S+)$", re.MULTILINE)
_MODULE = re.compile(r"^go: (?:downloading )?(\S+@[^\s:]+):? (.*)$", re.MULTILINE)


def failure_summary(stderr: str) -> str:
    """The module or package that failed, and the first error line about it."""
    package = _PACKAGE.search(stderr)
    if package:
        rest = stderr[package.end() :].strip().splitlines()
        return f"package {package.group(1)}: {rest[0] if rest else 'did not compile'}"
    module = _MODULE.search(stderr)
    if module:
        return f"module {module.group(1)}: {module.group(2)}"
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "go exited with an error and printed nothing"


def kubernetes_go_mod(rel: Release, upstream_go_mod: str) -> str:
    """Our go.mod: k8s.io/kubernetes at the release, its staging modules at v0.x."""
    block = re.search(r"^replace \((.*?)^\)", upstream_go_mod, re.MULTILINE | re.DOTALL)
    if block is None:
        raise BuildError(f"k8s.io/kubernetes@{rel.kubernetes}: its go.mod has no replace block")
    staged = sorted(
        line.split("=>")[0].strip()
        for line in block.group(1).splitlines()
        if "=> ./staging/" in line
    )
    go_line = re.search(r"^go (\S+)$", upstream_go_mod, re.MULTILINE)
    replaces = "\n".join(f"\t{name} => {name} {rel.staging}" for name in staged)
    return (
        "module portal.local/control-plane\n\n"
        f"go {go_line.group(1) if go_line else '1.26.0'}\n\n"
        f"require k8s.io/kubernetes {rel.kubernetes}\n\n"
        f"replace (\n{replaces}\n)\n"
    )


def version_ldflags(rel: Release) -> str:
    """What the upstream build stamps into the binaries (hack/lib/version.sh), so that
    `--version`, `/version` and kubectl's skew check see the release."""
    major, minor = rel.kubernetes[1:].split(".")[:2]
    stamps = {
        "gitVersion": rel.kubernetes,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
    }
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {package}.{name}={value}" for name, value in stamps.items()]
    return " ".join(flags)


def build_kubernetes(rel: Release, src: Path, out: Path, log: Path) -> None:
    src.mkdir(parents=True, exist_ok=True)
    module = f"k8s.io/kubernetes@{rel.kubernetes}"
    info = json.loads(_go(["mod", "download", "-json", module], src, log, f"fetching {module}"))
    (src / "go.mod").write_text(kubernetes_go_mod(rel, Path(info["GoMod"]).read_text()))
    commands = [f"k8s.io/kubernetes/cmd/{name}" for name in COMPONENTS]
    _go(["get", *(f"{c}@{rel.kubernetes}" for c in commands)], src, log, f"resolving {module}")
    say(f"compiling {', '.join(COMPONENTS)} (several minutes on two cores)")
    ldflags = version_ldflags(rel)
    _go(["build", "-trimpath", "-ldflags", ldflags, "-o", f"{out}/", *commands], src, log, "build")


def build_etcd(rel: Release, src: Path, out: Path, log: Path) -> None:
    src.mkdir(parents=True, exist_ok=True)
    (src / "go.mod").write_text("module portal.local/etcd\n\ngo 1.26.0\n")
    (src / "main.go").write_text(ETCD_MAIN)
    module = f"go.etcd.io/etcd/server/v3@{rel.etcd}"
    _go(["get", module], src, log, f"resolving {module}")
    say("compiling etcd")
    _go(
        ["build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / "etcd"), "."], src, log, "build"
    )


def binary_version(path: Path) -> str:
    done = subprocess.run([str(path), "--version"], capture_output=True, text=True, check=False)
    return (done.stdout + done.stderr).strip().splitlines()[0] if done.returncode == 0 else ""


def verify(rel: Release, directory: Path) -> None:
    """Each binary answers --version with the release it was built from."""
    expected = {name: f"Kubernetes {rel.kubernetes}" for name in COMPONENTS}
    expected["etcd"] = f"etcd Version: {rel.etcd[1:]}"
    for name, wanted in expected.items():
        path = directory / name
        if not path.exists():
            raise BuildError(f"{path} is missing")
        found = binary_version(path)
        if found != wanted:
            raise BuildError(f"{path} says {found!r}, expected {wanted!r}")


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    """Two processes (make test's workers, a demo) wanting the build wait for one build."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_built(rel: Release) -> Path:
    """The directory holding the release's four binaries, built first if need be."""
    target = bin_dir(rel)
    if all((target / name).exists() for name in BINARIES):
        verify(rel, target)
        return target
    with _build_lock():
        if all((target / name).exists() for name in BINARIES):
            return target
        return _build(rel, target)


def _build(rel: Release, target: Path) -> Path:
    work = target.parent
    staging = work / "bin.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    log = work / "build.log"
    log.write_text("")
    say(f"building Kubernetes {rel.kubernetes} and etcd {rel.etcd} into {target}")
    started = time.monotonic()
    build_kubernetes(rel, work / "src" / "kubernetes", staging, log)
    say(f"Kubernetes components built in {time.monotonic() - started:.0f} s")
    etcd_started = time.monotonic()
    build_etcd(rel, work / "src" / "etcd", staging, log)
    say(f"etcd built in {time.monotonic() - etcd_started:.0f} s")
    verify(rel, staging)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)  # whole or not at all: a killed build leaves no half cache
    say(f"built in {time.monotonic() - started:.0f} s")
    return target
