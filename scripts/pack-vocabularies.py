#!/usr/bin/env python3
"""Packs tiktoken-rs's OpenAI vocabularies into crates/sessions/vocab/ (see the README there).

The .tiktoken files are base64 tokens and their ranks as text (5.3 MB for o200k_base and
cl100k_base); the ranks run 0, 1, 2, ... so only the tokens' bytes are kept, each after its
length in one byte, and the whole is zlib-compressed: 1.5 MB shipped in the binary instead.
A test of nanocrab-sessions checks that every token decodes the same as tiktoken-rs's own.

usage: python3 scripts/pack-vocabularies.py [TIKTOKEN_RS_SOURCE_DIR]
(default: the tiktoken-rs version of Cargo.lock in ~/.cargo/registry/src)
"""

import base64
import glob
import os
import re
import sys
import zlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
NAMES = ["o200k_base", "cl100k_base"]


def source_dir():
    if len(sys.argv) > 1:
        return sys.argv[1]
    lock = open(os.path.join(ROOT, "Cargo.lock")).read()
    version = re.search(r'name = "tiktoken-rs"\nversion = "([^"]+)"', lock).group(1)
    home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    found = glob.glob(os.path.join(home, "registry/src/*", f"tiktoken-rs-{version}"))
    if not found:
        sys.exit(f"tiktoken-rs {version} is not in {home}/registry/src: run `cargo fetch`")
    return found[0]


def main():
    assets = os.path.join(source_dir(), "assets")
    for name in NAMES:
        packed = bytearray()
        with open(os.path.join(assets, f"{name}.tiktoken")) as text:
            for expected_rank, line in enumerate(text):
                token, rank = line.split()
                if int(rank) != expected_rank:
                    sys.exit(f"{name}: rank {rank} where {expected_rank} was expected")
                raw = base64.b64decode(token)
                if not 0 < len(raw) < 256:
                    sys.exit(f"{name}: a token of {len(raw)} bytes")
                packed.append(len(raw))
                packed += raw
        out = os.path.join(ROOT, "crates/sessions/vocab", f"{name}.zlib")
        with open(out, "wb") as f:
            f.write(zlib.compress(bytes(packed), 9))
        print(f"{out}: {expected_rank + 1} tokens, {os.path.getsize(out)} bytes")


if __name__ == "__main__":
    main()
