"""Rewrite an SGLang wheel without what no device call of this project imports: the Rust server, bench, gRPC and
multimodal extensions (``srt/rust_extensions/_{server,bench,grpc,multimodal}*.so``), the multimodal generator
(``multimodal_gen/``) and SGLang's tests (``test/``); its RECORD is rewritten to match. The slim wheel (about 14 MB
against 39 MB) is what lets the SGLang wheels travel beside the tree within the 64 MiB a device call carries.

    python3 scripts/slim_sglang_wheel.py .whl/sglang-0.5.23-*.whl   # rewrites the file in place
"""

from __future__ import annotations

import re
import sys
import zipfile
from pathlib import Path

DROP = re.compile(r"^sglang/(srt/rust_extensions/_(server|bench|grpc|multimodal)[^/]*\.so|multimodal_gen/|test/)")


def slim(path: Path) -> tuple[int, int]:
    """Rewrite the wheel at ``path`` without DROP's members; returns (bytes before, bytes after)."""
    before = path.stat().st_size
    tmp = path.with_suffix(".slim")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if DROP.match(info.filename):
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                data = "".join(line + "\n" for line in data.decode().splitlines()
                               if not DROP.match(line.split(",", 1)[0])).encode()
            dst.writestr(info, data)
    tmp.replace(path)
    return before, path.stat().st_size


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: slim_sglang_wheel.py WHEEL [WHEEL ...]")
    for arg in sys.argv[1:]:
        b, a = slim(Path(arg))
        print(f"{arg}: {b / 1e6:.1f} MB -> {a / 1e6:.1f} MB")
