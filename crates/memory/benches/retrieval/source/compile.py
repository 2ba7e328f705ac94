"""Compile the authoring files (notes-*.txt) into ../corpus.jsonl and ../queries.jsonl.

Format of the authoring files:
    === memory/2025-04-29          starts a note (id; path is id + ".md")
    any lines                      the note's text
    ?? some query                  a query whose relevant note is the current one
    ?? some query || id1, id2      ... plus further relevant notes
    === QUERIES                    a section of queries with no implicit note
Query ids (q001...) follow file order: append new notes and queries to the last
file (or a new notes-12.txt) to keep existing ids stable.
Stdlib only, deterministic: python3 source/compile.py
"""
import json, re, sys, glob, os
HERE = os.path.dirname(os.path.abspath(__file__))
src_files = sorted(glob.glob(os.path.join(HERE, "notes-*.txt")))
out = os.path.dirname(HERE)
docs, queries = {}, []
cur = None
for f in src_files:
    for line in open(f, encoding="utf-8"):
        line = line.rstrip("\n")
        if line.startswith("=== "):
            name = line[4:].strip().removesuffix(".md")
            cur = None if name == "QUERIES" else name
            if cur:
                assert cur not in docs, cur
                docs[cur] = []
            continue
        if line.startswith("?? "):
            body = line[3:]
            extra = []
            if "||" in body:
                body, e = body.split("||", 1)
                extra = [x.strip() for x in e.split(",") if x.strip()]
            rel = ([cur] if cur else []) + extra
            queries.append((body.strip(), rel))
            continue
        if cur:
            docs[cur].append(line)
bad = [(q, r) for q, r in queries for d in r if d not in docs]
assert not bad, bad
seen = set()
for q, _ in queries:
    assert q.lower() not in seen, q
    seen.add(q.lower())
with open(os.path.join(out, "corpus.jsonl"), "w", encoding="utf-8") as fh:
    for did, lines in docs.items():
        text = "\n".join(lines).strip() + "\n"
        fh.write(json.dumps({"id": did, "path": did + ".md", "text": text}, ensure_ascii=False) + "\n")
with open(os.path.join(out, "queries.jsonl"), "w", encoding="utf-8") as fh:
    for i, (q, rel) in enumerate(queries, 1):
        fh.write(json.dumps({"id": f"q{i:03d}", "query": q, "relevant": list(dict.fromkeys(rel))}, ensure_ascii=False) + "\n")
print(len(docs), "docs;", len(queries), "queries;", sum(1 for _, r in queries if len(set(r)) > 1), "multi-relevant")
