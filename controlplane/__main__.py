"""`python -m controlplane build` builds (or finds cached) the binaries;
`python -m controlplane up --dir D` serves a control plane until interrupted.
Bad input ends with one line and exit status 2."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from controlplane.build import BuildError, ensure_built
from controlplane.launch import ControlPlaneError, Options, start
from controlplane.release import ReleaseError, bin_dir, release


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controlplane")
    parser.add_argument("--release", help="a Kubernetes release like v1.37.2 (default: pinned)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("build", help="build the binaries into the cache, or find them there")
    commands.add_parser("where", help="print the cached binaries' directory")
    up = commands.add_parser("up", help="serve a control plane until interrupted")
    up.add_argument("--dir", type=Path, required=True, help="its state: certs, logs, kubeconfig")
    up.add_argument("--port", type=int, help="the API server's port (default: a free one)")
    args = parser.parse_args(argv)
    try:
        rel = release(args.release)
        if args.command == "where":
            print(bin_dir(rel))
        elif args.command == "build":
            print(ensure_built(rel))
        else:
            serve(args.dir, args.port, rel)
    except (ReleaseError, BuildError, ControlPlaneError) as error:
        print(f"control plane: {error}", file=sys.stderr)
        return 2
    return 0


def serve(directory: Path, port: int | None, rel) -> None:  # type: ignore[no-untyped-def]
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    plane = start(directory.resolve(), rel=rel, apiserver_port=port, options=Options())
    try:
        print(f"control plane: serving {plane.url}; KUBECONFIG={plane.kubeconfig}", flush=True)
        while not stopping.wait(1):
            for name, process in plane.processes.items():
                if process.poll() is not None:
                    raise ControlPlaneError(f"{name} exited with {process.returncode}")
    finally:
        plane.stop()


if __name__ == "__main__":
    sys.exit(main())
