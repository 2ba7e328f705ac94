#!/bin/bash
# usage: scripts/turn-syscalls.sh NANOCRAB_BIN MOCK_PORT OUTDIR
# (MOCK_PORT: the first line `mock-llm --reply "Hello! How can I help?"` prints; OUTDIR is wiped)
# Runs 3 turns of `agent -m hello` on one session, then a 4th under strace; prints the
# syscalls on the session's files (transcript, settings) and the whole process's totals.
set -e
BIN=$1; PORT=$2; OUT=$3
rm -rf "$OUT"; mkdir -p "$OUT"
export HOME=$OUT NANOCRAB_HOME=$OUT/home PATH=/usr/bin:/bin
"$BIN" onboard --model anthropic/bench-model >/dev/null
python3 - "$OUT/home/config.json" "$PORT" <<'PY'
import json,sys
p=sys.argv[1]; c=json.load(open(p))
c["providers"]={"anthropic":{"apiKey":"bench-key","apiBase":f"http://127.0.0.1:{sys.argv[2]}"}}
open(p,"w").write(json.dumps(c,indent=2))
PY
for i in 1 2 3; do "$BIN" agent -m "hello $i" --session bench:x >/dev/null; done
strace -f -y -o "$OUT/trace" "$BIN" agent -m "hello 4" --session bench:x >/dev/null
strace -f -c -o "$OUT/summary" "$BIN" agent -m "hello 5" --session bench:x >/dev/null
echo "== syscalls on sessions/ files (turn 4)"
grep 'sessions/' "$OUT/trace" | grep -v ' = -1 ENOENT' | sed -E 's/^[0-9]+ +//; s/\(.*//' | sort | uniq -c | sort -rn
echo "== ENOENT lookups on sessions/"
grep 'sessions/' "$OUT/trace" | grep ' = -1 ENOENT' | sed -E 's/^[0-9]+ +//; s/\(.*//' | sort | uniq -c
echo "== transcript reads/opens detail"
grep 'bench:x.jsonl' "$OUT/trace" | sed -E 's/^[0-9]+ +//' | cut -c1-150
echo "== whole process (turn 5): fsync/fdatasync/openat/read totals"
grep -E ' (fsync|fdatasync|openat|read|pread64|statx|newfstatat|write|total)$' "$OUT/summary"
