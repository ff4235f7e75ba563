"""Helpers for benchmarks/jax_matrix.sh (standard library only).

    python benchmarks/jax_matrix.py versions FLOOR < "output of pip index versions jax"
        prints the newest patch of every JAX minor release from FLOOR up, oldest first.
    python benchmarks/jax_matrix.py selfcheck
        run inside a test environment: autoflow's full check of JAX's private API
        (``runtime/jax/selfcheck.py``); prints "all", or the private paths this JAX lacks.
    python benchmarks/jax_matrix.py table RESULTS.tsv OUT.md KEY=VALUE...
        turns the rows jax_matrix.sh wrote into a Markdown table (printed and written
        to OUT.md), with the failing tests of each JAX under it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

COUNTS = ("passed", "failed", "skipped", "xfailed", "xpassed", "error")
# pytest's last line, e.g. "2 failed, 310 passed, 3 skipped, 1 xfailed, 4 warnings in 81.20s"
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?|deselected|warnings?)\b")
_TAIL = re.compile(r"\bin [\d.]+s\b|no tests ran")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def versions(floor: str, listing: str) -> list[str]:
    """The newest patch of each minor release >= floor, from `pip index versions`."""
    match = re.search(r"Available versions:\s*(.*)", listing)
    if not match:
        raise SystemExit("no 'Available versions:' line in the pip index output")
    newest: dict[tuple[int, int], str] = {}
    for version in (v.strip() for v in match.group(1).split(",")):
        if not re.fullmatch(r"\d+(\.\d+)+", version):  # skip pre-releases, "0.1", odd names
            continue
        if len(_key(version)) < 3 or _key(version) < _key(floor):
            continue
        minor = _key(version)[:2]
        if minor not in newest or _key(version) > _key(newest[minor]):
            newest[minor] = version
    return [newest[m] for m in sorted(newest)]


def selfcheck() -> str:
    """What autoflow's full self-check says of this JAX: "all", or the paths it lacks."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import autoflow  # noqa: F401
        from autoflow.runtime.jax import selfcheck as check

        lost = check.report()["lost"]
    return "all" if not lost else "lacks: " + "; ".join(sorted(lost))


def parse_log(text: str) -> dict:
    """Counts from pytest's last summary line, and the FAILED/ERROR test ids."""
    counts = {name: 0 for name in COUNTS}
    summary = ""
    for line in reversed(text.splitlines()):
        stripped = line.strip("= \t")
        if _TAIL.search(stripped) and (_COUNT.search(stripped) or "no tests ran" in stripped):
            summary = stripped
            break
    for number, word in _COUNT.findall(summary):
        word = {"errors": "error", "warnings": "warning"}.get(word, word)
        if word in counts:
            counts[word] = int(number)
    failing = []
    for line in text.splitlines():
        m = re.match(r"(FAILED|ERROR) (\S+)(?: - (.*))?", line)
        if m:
            failing.append((m.group(2), (m.group(3) or "").strip()))
    # The exceptions behind the failures, most frequent first ("E   KeyError: ..." lines).
    raised: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"E\s+((?:[\w.]+\.)?\w*(?:Error|Exception|Failed)\b.*)", line)
        if m and not m.group(1).startswith("jax._src.source_info_util"):
            raised[m.group(1)[:200]] = raised.get(m.group(1)[:200], 0) + 1
    errors = sorted(raised.items(), key=lambda kv: -kv[1])
    return {"summary": summary, "counts": counts, "failing": failing, "errors": errors}


def table(results: Path, out: Path, meta: dict[str, str]) -> str:
    rows, details = [], []
    for line in results.read_text().splitlines():
        if not line.strip():
            continue
        version, status, jax_v, py_v, wall, warn, log, reason = (line.split("\t") + [""] * 8)[:8]
        if status == "not-installable":
            rows.append(f"| {version} | - | {py_v} | - | - | - | - | - | {wall} | - | "
                        f"not installable: {reason} |")
            continue
        parsed = parse_log(Path(log).read_text(errors="replace")) if Path(log).exists() else None
        c = parsed["counts"] if parsed else {}
        if not parsed or not parsed["summary"]:
            note = f"no pytest summary ({reason or 'see log'})"
        elif status == "timeout":
            note = "timed out"
        elif c["failed"] or c["error"]:
            note = "FAILURES"
        else:
            note = "ok"
        rows.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
            version, jax_v, py_v, c.get("passed", "-"), c.get("failed", "-"), c.get("skipped", "-"),
            c.get("xfailed", "-"), c.get("error", "-"), wall, warn, note))
        if parsed and parsed["failing"]:
            shown = parsed["failing"][:10]
            more = len(parsed["failing"]) - len(shown)
            details.append(f"### JAX {version}: {len(parsed['failing'])} failing\n")
            # pytest cuts the reason to the terminal's width: a stub like "Typ..." says nothing
            details += [f"- `{test}`" + (f": {why[:160]}" if len(why) > 20 else "")
                        for test, why in shown]
            if more:
                details.append(f"- ... and {more} more")
            details.append("\nRaised (count, message):\n")
            details += [f"- {n} x `{msg}`" for msg, n in parsed["errors"][:3]]
            details.append(f"\n(log: `{log}`)\n")

    header = (
        "# autoflow's core tests on each JAX minor release\n\n"
        "`benchmarks/jax_matrix.sh` installs, for every JAX minor release PyPI offers from "
        "the floor in pyproject.toml (`jax>=...`) to the newest (the newest patch of each "
        "minor), a fresh virtual environment with that `jax` and `jaxlib`, the test tools and "
        "autoflow itself (`pip install --no-deps -e .`, as `.ci/run` does for the oldest JAX), "
        "then runs the core tests (no ecosystem libraries) and records the pytest counts, the "
        "wall time of the test run and which of JAX's private paths autoflow's full self-check "
        "(`runtime/jax/selfcheck.py`) finds working (\"all\", or what this JAX lacks: autoflow "
        "takes the public path there). A version "
        "whose install fails is listed as not installable. Run it with "
        "`bash benchmarks/jax_matrix.sh`; `PY=python3.12` picks the interpreter, "
        "`VERSIONS=\"0.4.38 0.10.2\"` the JAX versions, `WORK=dir` where the environments go, "
        "`KEEP=1` keeps them. It runs under `nice -n 15`.\n\n"
        f"- date: {meta.get('date', '?')}\n"
        f"- machine: {meta.get('machine', '?')}\n"
        f"- python: {meta.get('python', '?')}\n"
        f"- commit: {meta.get('commit', '?')}\n"
        f"- tests: `{meta.get('tests', '?')}`\n"
        f"- total wall time: {meta.get('total', '?')} s\n\n"
    )
    head = ("| JAX | installed jax | Python | passed | failed | skipped | xfailed | errors | "
            "wall (s) | private paths (self-check) | result |\n"
            "|---|---|---|---:|---:|---:|---:|---:|---:|---|---|")
    text = header + head + "\n" + "\n".join(rows) + "\n"
    if details:
        text += "\n## Failing tests (first 10 per version)\n\n" + "\n".join(details) + "\n"
    out.write_text(text)
    return text


def main(argv: list[str]) -> None:
    if argv[:1] == ["versions"] and len(argv) == 2:
        print(" ".join(versions(argv[1], sys.stdin.read())))
    elif argv[:1] == ["selfcheck"]:
        print(selfcheck())
    elif argv[:1] == ["table"] and len(argv) >= 3:
        meta = dict(arg.split("=", 1) for arg in argv[3:])
        print(table(Path(argv[1]), Path(argv[2]), meta), end="")
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
