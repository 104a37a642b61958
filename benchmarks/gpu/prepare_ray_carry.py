"""Ray for the H200's fleet step (g): one more device call that carries a slim Ray and its needs.

Ray 2.60.0's cp312 wheel is 79 MB, too much beside vLLM's pieces; 32 MB of it are Java jars (only
for Java workers) and a few MB are libraries the lab never imports (RLlib, Data, Serve, Tune,
Train, LLM). Without them it is about 42 MB, plus the core dependencies the image may lack
(msgpack, protobuf, PyYAML, requests and its four, filelock), pinned to the versions the fleet is
tested with here. Output: `.carry-ray/wheels/`, one call (`run_on_h200.py stage1 --carry
.carry-ray`, before stage2, which installs what it kept). Idempotent.

    .venv/bin/python benchmarks/gpu/prepare_ray_carry.py
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import prepare_carry as carry  # noqa: E402

RAY_CARRY = carry.REPO / ".carry-ray"
RAY = "ray==2.60.0"
# Ray's own requirements (ray-2.60.0.dist-info/METADATA, no extras) the PyTorch image may lack,
# at the versions requirements-fleet.txt resolves to in this repo's .venv.
RAY_NEEDS = [
    "msgpack==1.2.4",
    "protobuf==7.36.2",
    "PyYAML==6.0.4",
    "requests==2.34.2",
    "urllib3==2.8.0",
    "idna==3.20",
    "charset-normalizer==3.4.4",
    "certifi==2026.10.19.post1",
    "filelock==4.3.1",
]
# Never imported by `ray start`, a raylet's workers or the lab's fleet (tuning/decide/fleet).
DROPPED = tuple(f"ray/{d}/" for d in ("jars", "rllib", "data", "serve", "tune", "train", "llm"))


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def slim_wheel(src: Path, dest: Path) -> Path:
    """Copy the wheel without DROPPED, its RECORD rewritten to list exactly what is left."""
    out = dest / src.name
    with (
        zipfile.ZipFile(src) as zin,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout,
    ):
        record_name = next(n for n in zin.namelist() if n.endswith(".dist-info/RECORD"))
        rows = []
        for info in zin.infolist():
            if info.filename.startswith(DROPPED) or info.filename == record_name:
                continue
            data = zin.read(info)
            zout.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
            rows.append([info.filename, record_hash(data), str(len(data))])
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows([*rows, [record_name, "", ""]])
        zout.writestr(record_name, text.getvalue())
    return out


def main() -> int:
    if "/.carry-ray/" not in carry.IGNORED:
        carry.IGNORED.append("/.carry-ray/")
    carry.ensure_excluded()
    dl, wheels = carry.BUILD / "ray", RAY_CARRY / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    if not list(dl.glob("ray-2.60.0-*.whl")):
        carry.pip_download([RAY], dl)
    src = sorted(dl.glob("ray-2.60.0-*.whl"))[0]
    if not (wheels / src.name).exists():
        slim_wheel(src, wheels)
    missing = [s for s in RAY_NEEDS if not carry.wheel_present(wheels, s)]
    if missing:
        carry.pip_download(missing, wheels)
    size = carry.tree_bytes(RAY_CARRY)
    total = size + carry.working_tree_bytes()
    carry.say(
        f"ray {src.stat().st_size / 1e6:.0f} MB -> {(wheels / src.name).stat().st_size / 1e6:.0f}"
        f" MB; call carry=['.carry-ray'] {size / 2**20:.1f} MiB + tree = {total / 2**20:.1f} MiB "
        f"{'OK' if total < carry.CALL_LIMIT else 'TOO BIG'}: `run_on_h200.py stage1 --carry "
        ".carry-ray` before stage2"
    )
    return 0 if total < carry.CALL_LIMIT else 1


if __name__ == "__main__":
    sys.exit(main())
