#!/usr/bin/env python3
"""Prints nanocrab's start-up and request-size figures against the loopback mock LLM.

    python3 scripts/bench.py [--runs N]

Builds release binaries, onboards a fresh NANOCRAB_HOME in a temp dir, then runs
`nanocrab agent -m hello` N times against `mock-llm` (nanocrab-testkit) for each wire protocol
and reports wall time, peak RSS, binary size and the size of the first request (system prompt,
messages and tool schemas, in characters). Nothing leaves 127.0.0.1.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_measured(argv, env):
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, rusage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    out = proc.stdout.read().decode()
    err = proc.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{out}\n{err}")
    return elapsed, rusage.ru_maxrss / 1024.0  # ru_maxrss is KiB on Linux


def request_size(body):
    """Characters of the parts a provider bills as input, per wire protocol."""
    if "system" in body:  # Anthropic Messages
        system = body["system"]
        system_chars = len(system if isinstance(system, str) else json.dumps(system))
        messages = body["messages"]
    else:  # OpenAI Chat Completions: the system prompt is the first message
        system_chars = sum(len(m["content"]) for m in body["messages"] if m["role"] == "system")
        messages = [m for m in body["messages"] if m["role"] != "system"]
    return {
        "system prompt": system_chars,
        "messages": len(json.dumps(messages, ensure_ascii=False)),
        "tool schemas": len(json.dumps(body.get("tools", []), ensure_ascii=False)),
        "whole body": len(json.dumps(body, ensure_ascii=False)),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()

    subprocess.run(
        ["cargo", "build", "--release", "--quiet", "-p", "nanocrab", "-p", "nanocrab-testkit",
         "--bin", "nanocrab", "--bin", "mock-llm"],
        cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    nanocrab = target / "release/nanocrab"
    mock_bin = target / "release/mock-llm"

    with tempfile.TemporaryDirectory(prefix="nanocrab-bench-") as tmp:
        tmp = Path(tmp)
        record = tmp / "requests.jsonl"
        mock = subprocess.Popen([str(mock_bin), "--reply", "Hello! How can I help?",
                                 "--record", str(record)], stdout=subprocess.PIPE, text=True)
        try:
            port = int(mock.stdout.readline().strip())
            print(f"binary size: {nanocrab.stat().st_size / 1e6:.2f} MB ({nanocrab})")
            for provider, base in [("anthropic", f"http://127.0.0.1:{port}"),
                                   ("openai", f"http://127.0.0.1:{port}/v1")]:
                home = tmp / provider
                env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "NANOCRAB_HOME": str(home)}
                subprocess.run([str(nanocrab), "onboard"], env=env, check=True,
                               stdout=subprocess.DEVNULL)
                config_path = home / "config.json"
                config = json.loads(config_path.read_text())
                config["agents"]["defaults"]["model"] = f"{provider}/bench-model"
                config["providers"] = {provider: {"apiKey": "bench-key", "apiBase": base}}
                config_path.write_text(json.dumps(config, indent=2))

                record.write_text("")
                times, rss = [], []
                for i in range(args.runs):
                    elapsed, peak = run_measured(
                        [str(nanocrab), "agent", "-m", "hello", "--session", f"bench:{i}"], env)
                    times.append(elapsed * 1000)
                    rss.append(peak)
                first = json.loads(record.read_text().splitlines()[0])
                sizes = request_size(first["body"])
                print(f"\n[{provider}] `nanocrab agent -m hello`, {args.runs} runs, fresh session each")
                print(f"  wall time  median {statistics.median(times):6.1f} ms   min {min(times):6.1f} ms")
                print(f"  peak RSS   median {statistics.median(rss):6.1f} MB   max {max(rss):6.1f} MB")
                print("  first request (characters): " +
                      ", ".join(f"{k} {v}" for k, v in sizes.items()))
        finally:
            mock.terminate()
            mock.wait()


if __name__ == "__main__":
    main()
