#!/usr/bin/env python3
"""Sanity check: plain Okapi BM25 over corpus.jsonl / queries.jsonl (stdlib only).

Tokenisation mimics SQLite FTS5's default `unicode61` tokenizer (lowercase,
split on anything that is not a letter or digit, no stemming, no stop words),
so the numbers are close to what FTS5 bm25() alone will give.

    python3 bm25_check.py            # from this directory
    python3 bm25_check.py --porter   # crude suffix stripping, like FTS5 `porter unicode61`
    python3 bm25_check.py --misses   # list queries whose relevant notes miss the top 5
    python3 bm25_check.py --no-stop  # keep stop words in queries (raw FTS5 OR-query)

By default common English stop words are dropped from queries (not from notes):
a raw FTS5 MATCH of a whole sentence would AND every word and mostly return
nothing, so the real search has to turn the query into OR-ed terms anyway.
"""
import json, math, re, sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
PORTER = "--porter" in sys.argv
STOP = set() if "--no-stop" in sys.argv else set("""
a about after all am an and any are as at be been being but by can could did do does
doing for from had has have how i if in into is it its me my of on or our should so
that the their them then there these they this to us was we were what when where which
who whose why will with would you your""".split())
K1, B = 1.2, 0.75


def stem(t):
    for suf in ("ational", "ations", "ation", "ings", "ing", "edly", "ed", "ies", "es", "s", "ly"):
        if len(t) > len(suf) + 2 and t.endswith(suf):
            return t[: -len(suf)]
    return t


def tok(s):
    toks = re.findall(r"[^\W_]+", s.lower())
    return [stem(t) for t in toks] if PORTER else toks


docs = [json.loads(l) for l in open(HERE / "corpus.jsonl", encoding="utf-8")]
queries = [json.loads(l) for l in open(HERE / "queries.jsonl", encoding="utf-8")]
tfs = [Counter(tok(d["text"])) for d in docs]
lens = [sum(c.values()) for c in tfs]
avgdl = sum(lens) / len(lens)
df = Counter(t for c in tfs for t in c)
N = len(docs)
idf = {t: math.log(1 + (N - n + 0.5) / (n + 0.5)) for t, n in df.items()}

r5 = mrr = 0.0
misses = []
for q in queries:
    qt = [t for t in tok(q["query"]) if t not in STOP]
    scores = []
    for i, c in enumerate(tfs):
        s = 0.0
        for t in qt:
            f = c.get(t)
            if f:
                s += idf[t] * f * (K1 + 1) / (f + K1 * (1 - B + B * lens[i] / avgdl))
        if s > 0:
            scores.append((s, i))
    scores.sort(key=lambda x: (-x[0], docs[x[1]]["id"]))
    ranked = [docs[i]["id"] for _, i in scores]
    rel = set(q["relevant"])
    r5 += len(rel & set(ranked[:5])) / len(rel)
    rr = next((1 / (k + 1) for k, d in enumerate(ranked[:10]) if d in rel), 0.0)
    mrr += rr
    if not rel & set(ranked[:5]):
        misses.append((q["id"], q["query"], ranked[:3]))

n = len(queries)
print(f"docs={N} queries={n} tokenizer={'porter-ish' if PORTER else 'unicode61'} stopwords={'on' if STOP else 'off'}")
print(f"BM25 recall@5={r5 / n:.3f}  MRR@10={mrr / n:.3f}  queries with no relevant note in top 5: {len(misses)}")
if "--misses" in sys.argv:
    for m in misses:
        print(*m, sep="\t")
