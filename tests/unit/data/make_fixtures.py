#!/usr/bin/env python3
"""make_fixtures.py - writes the safetensors fixtures of tests/unit/test_safetensors.c.

The Python safetensors package is not on the project's machines (Debian 12 has no package for
it), so these files are made by hand from the format spec, laid out exactly as the reference
implementation's serialize() lays them out: tensors sorted by dtype (widest enum value first,
I64 > F64 > F32 > I32 > BF16 > F16 > BOOL) then by name, "__metadata__" first in the JSON,
compact separators, header padded with spaces to a multiple of 8. ref_attn0.safetensors is
byte for byte the reference's own test vector (test_serialization in its tensor.rs).
Only the standard library is used:  python3 tests/unit/data/make_fixtures.py
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ORDER = ["BOOL", "F16", "BF16", "I32", "F32", "F64", "I64"]  # reference enum order (subset)


def serialize(tensors, metadata=None):
    """tensors: {name: (dtype, shape, raw bytes)}"""
    items = sorted(tensors.items(), key=lambda kv: (-ORDER.index(kv[1][0]), kv[0]))
    header, off = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in items:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(raw for _, (_, _, raw) in items)


def write(name, blob):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(blob)


write("ref_attn0.safetensors",
      serialize({"attn.0": ("F32", [1, 2, 3], struct.pack("<6f", 0, 1, 2, 3, 4, 5))}))
write("ref_pt.safetensors", serialize({
    "weight": ("F32", [2, 3], struct.pack("<6f", 1, 2, 3, 4, 5, 6)),
    "bias": ("F32", [3], struct.pack("<3f", 0.5, -1, 2)),
    "empty": ("F32", [0], b""),
    "step": ("I64", [], struct.pack("<q", 1200)),
    "d": ("F64", [1], struct.pack("<d", 3.141592653589793)),
    "idx": ("I32", [2], struct.pack("<2i", 7, -8)),
    "emb": ("BF16", [2, 2], struct.pack("<4H", 0x3F80, 0xC000, 0x3F00, 0x4040)),
    "h": ("F16", [2], struct.pack("<2H", 0x3C00, 0xB800)),
    "mask": ("BOOL", [4], bytes([1, 0, 0, 1])),
}, {"format": "pt", "note": "caf\u00e9"}))
