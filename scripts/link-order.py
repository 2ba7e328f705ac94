#!/usr/bin/env python3
"""Writes crates/nanocrab/link-order.txt: the functions `nanocrab gateway` runs from its start
through a hundred turns, which the release build's linker places together (see
crates/nanocrab/build.rs and "Binary layout" in docs/benchmarks.md).

    python3 scripts/link-order.py

Builds the release binary with its symbols kept (`cargo rustc --release -- -C strip=none`:
the same code and names as the stripped one), runs the gateway_load bench's small load
against it under `valgrind --tool=callgrind`, and keeps the names of the binary's own
functions that ran, in the order callgrind reports them. Run it after a dependency or
toolchain upgrade (the names carry a hash of their crate's version and build settings) and
after large changes to the gateway; it prints how many of the old names the new build still
had. Needs valgrind and nm; nothing leaves 127.0.0.1.
"""
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORDER = ROOT / "crates/nanocrab/link-order.txt"
# Enough turns to run every step of one (a chat's first and later turns, the transcript cache
# missed and hit), few enough for callgrind's slowness.
LOAD = ["--chats", "20", "--per-chat", "5", "--idle", "2"]


def cargo_executables(argv, name):
    # Cargo's own options go before a `--`, if there is one.
    split = argv.index("--") if "--" in argv else len(argv)
    argv = argv[:split] + ["--message-format=json"] + argv[split:]
    built = subprocess.run(argv, cwd=ROOT, check=True,
                           stdout=subprocess.PIPE, text=True)
    found = None
    for line in built.stdout.splitlines():
        message = json.loads(line)
        if (message.get("reason") == "compiler-artifact"
                and message["target"]["name"] == name and message.get("executable")):
            found = message["executable"]
    if found is None:
        sys.exit(f"cargo built no {name}")
    return found


def main():
    binary = cargo_executables(
        ["cargo", "rustc", "--release", "--locked", "-p", "nanocrab", "--bin", "nanocrab",
         "--", "-C", "strip=none"], "nanocrab")
    # The driver only sends messages; the dev build of it is quick to make.
    bench = cargo_executables(
        ["cargo", "test", "--locked", "-p", "nanocrab", "--bench", "gateway_load", "--no-run"],
        "gateway_load")
    defined = set(subprocess.run(["nm", "--defined-only", "--format=just-symbols", binary],
                                 check=True, stdout=subprocess.PIPE, text=True).stdout.split())
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "callgrind.out"
        wrapper = Path(tmp) / "nanocrab"
        # The bench runs `onboard` and then `gateway` with the binary it is given; only the
        # gateway is traced.
        wrapper.write_text(
            "#!/bin/sh\n"
            'if [ "$1" = gateway ]; then\n'
            f"  exec valgrind --tool=callgrind --demangle=no --compress-strings=no "
            f"--callgrind-out-file={trace} {binary} \"$@\"\n"
            "fi\n"
            f'exec {binary} "$@"\n')
        wrapper.chmod(0o755)
        # Under valgrind the gateway is too slow for the bench's figures, and its warnings
        # (valgrind's own) make the bench report a failure: only the trace matters here.
        subprocess.run([bench, "--gateway", str(wrapper)] + LOAD, cwd=tmp,
                       stdout=subprocess.DEVNULL)
        if not trace.exists():
            sys.exit("callgrind wrote no trace: is valgrind installed?")
        ran = []
        seen = set()
        for line in trace.read_text(errors="replace").splitlines():
            match = re.match(r"fn=(?:\(\d+\) )?(.+)", line)
            if match and match[1] in defined and match[1] not in seen:
                seen.add(match[1])
                ran.append(match[1])
    old = set(ORDER.read_text().split()) if ORDER.exists() else set()
    ORDER.write_text("".join(f"{name}\n" for name in ran))
    print(f"{ORDER.relative_to(ROOT)}: {len(ran)} functions; "
          f"{len(old & defined)} of the {len(old)} it listed before were in this build")


if __name__ == "__main__":
    main()
