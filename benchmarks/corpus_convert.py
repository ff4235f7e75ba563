"""Robustness run: ``autoflow convert`` over a large corpus of real Python files.

Converts every ``.py`` file of

* the Python standard library (the directory holding the running
  interpreter's ``os`` module, without ``site-packages``/``dist-packages``;
  test data that does not parse is kept and counted as "input does not
  parse"), and
* the installed packages jax, numpy, scipy, sympy, pandas, flax, optax and
  equinox (those that are installed; located with
  ``importlib.util.find_spec``, which does not import them),

about 8,000 files in all, with the function ``autoflow convert`` uses
(``autoflow.transforms.module.convert_module``), called in-process in worker
processes -- never one process per file -- and each file read, decoded and
normalised exactly as ``autoflow.cli._convert_one`` does. Each file gets one
class:

``ok``
    the converted text compiles (``compile(text, path, "exec")``).
``input-does-not-parse``
    the file cannot be read/decoded (``autoflow.cli.InputError``) or the input
    itself does not compile; not counted against autoflow.
``clear-user-error``
    what the CLI's ``convert`` reports as a user error (exit status 1) for an
    input that compiles: ``RecursionError`` ("too deeply nested for autoflow
    to convert"). (``SyntaxError`` is the CLI's other such category; a
    ``SyntaxError`` raised for an input that *does* compile is an autoflow
    bug and counts as ``internal-error``.)
``internal-error``
    any other exception (``autoflow convert`` exits 3 on these); the report
    records its type, message, the innermost autoflow frame of the traceback
    (``file:function:line``) and, where one can be found among the frames'
    locals, the input line being converted.
``output-does-not-compile``
    the input compiles and converts but the output does not compile; the
    report records the ``SyntaxError`` message, the output line and its text.
``unchanged-file-differs``
    no function of the file converts, yet the output is not the input byte
    for byte (``autoflow convert`` must print such a file exactly as read).
``comments-lost``
    a comment of the input is missing from the output.
``timeout`` / ``worker-crash``
    the per-file time limit (``--timeout``, default 60 s) was hit, or the
    worker process died on the file.

Run (from the repository root; it need not run in CI)::

    .venv/bin/python benchmarks/corpus_convert.py                  # everything, 2 jobs
    .venv/bin/python benchmarks/corpus_convert.py --jobs 8 --report /tmp/r.json
    .venv/bin/python benchmarks/corpus_convert.py --only numpy --limit 200
    .venv/bin/python benchmarks/corpus_convert.py --only stdlib

It prints counts per class and per package and the failure groups (same
exception type, message pattern and autoflow frame), and writes a JSON report
with every failure (file, class, exception, message, frame, line) to
``--report`` (default ``/tmp/corpus_report.json``). Progress goes to stderr.
"""

import argparse
import collections
import importlib.util
import json
import multiprocessing as mp
import os
import queue
import re
import signal
import subprocess
import sys
import time
import traceback
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

PACKAGES = ("jax", "numpy", "scipy", "sympy", "pandas", "flax", "optax", "equinox")
CLASSES = ("ok", "input-does-not-parse", "clear-user-error", "internal-error",
           "output-does-not-compile", "unchanged-file-differs", "comments-lost", "timeout",
           "worker-crash", "not-run")
FAILURES = ("internal-error", "output-does-not-compile", "unchanged-file-differs",
            "comments-lost", "timeout", "worker-crash")
AUTOFLOW_DIR = os.path.join(ROOT, "autoflow")


# ---------------------------------------------------------------------------
# the corpus
# ---------------------------------------------------------------------------

def _py_files(top, skip_dirs=("site-packages", "dist-packages", "__pycache__")):
    out = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d not in skip_dirs)
        out.extend(os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py"))
    return out


def corpus(only=None):
    """``[(package, path)]``: the stdlib first, then each installed package."""
    groups = []
    if only in (None, "stdlib"):
        groups.append(("stdlib", _py_files(os.path.dirname(os.__file__))))
    for name in PACKAGES:
        if only not in (None, name):
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            print(f"corpus: {name} is not installed; skipped", file=sys.stderr)
            continue
        files = []
        for top in (spec.submodule_search_locations or []):
            files.extend(_py_files(top))
        if not files and spec.origin and spec.origin.endswith(".py"):
            files = [spec.origin]
        groups.append((name, files))
    seen, out = set(), []
    for name, files in groups:
        for path in files:
            real = os.path.realpath(path)
            if real not in seen:
                seen.add(real)
                out.append((name, path))
    return out


# ---------------------------------------------------------------------------
# one file (in a worker)
# ---------------------------------------------------------------------------

class _Timeout(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _Timeout()


def _compile(text, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compile(text, path, "exec", dont_inherit=True)


def _autoflow_frame(tb):
    """``(file:function:line, last frame overall, input line)`` of a traceback."""
    frames = traceback.extract_tb(tb)
    af = None
    for fr in reversed(frames):
        if os.path.abspath(fr.filename).startswith(AUTOFLOW_DIR + os.sep):
            af = f"{os.path.relpath(fr.filename, ROOT)}:{fr.name}:{fr.lineno}"
            break
    last = None
    if frames:
        fr = frames[-1]
        last = f"{fr.filename}:{fr.name}:{fr.lineno}"
    # The input line: the innermost AST node with a line number among the
    # locals of autoflow's frames (a best guess; None when there is none).
    line = None
    t, stack = tb, []
    while t is not None:
        stack.append(t.tb_frame)
        t = t.tb_next
    for frame in reversed(stack):
        if not os.path.abspath(frame.f_code.co_filename).startswith(AUTOFLOW_DIR + os.sep):
            continue
        for name in ("node", "stmt", "new", "tree"):
            v = frame.f_locals.get(name)
            ln = getattr(v, "lineno", None)
            if isinstance(ln, int) and hasattr(v, "_fields"):
                line = ln
                break
        if line is not None:
            break
    return af, last, line


def _comments(text):
    import io
    import tokenize
    try:
        return collections.Counter(t.string for t in tokenize.generate_tokens(
            io.StringIO(text).readline) if t.type == tokenize.COMMENT)
    except (tokenize.TokenError, SyntaxError):
        return None


def convert_file(path, timeout):
    """The record of one file: ``{"class": ..., ...}``.

    Beside compiling, the output is checked for faithfulness: a file with
    nothing to convert comes back byte for byte, every comment of the input
    is in the output, and ``faithful`` counts the converted functions whose
    printing as written failed its own check (they are printed by the
    unparser instead; see ``autoflow/transforms/faithful.py``).
    """
    from autoflow.cli import InputError, read_source_encoding
    from autoflow.transforms import faithful
    from autoflow.transforms.module import convert_module

    rec = {"file": path}
    t0 = time.perf_counter()
    try:
        try:
            source, _ = read_source_encoding(path)
        except InputError as e:
            rec.update({"class": "input-does-not-parse", "message": str(e)})
            return rec
        source = source.replace("\r\n", "\n")  # as cli._convert_one does
        try:
            _compile(source, path)
        except (SyntaxError, ValueError) as e:
            rec.update({"class": "input-does-not-parse", "exception": type(e).__name__,
                        "message": str(e)})
            return rec
        if timeout:
            signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with faithful.fallbacks() as fallbacks:
                    text, changed = convert_module(source, path)
                rec["fallbacks"] = [list(f) for f in fallbacks]
        finally:
            if timeout:
                signal.setitimer(signal.ITIMER_REAL, 0)
        rec["changed"] = len(changed)
        rec["identical"] = text == source
        try:
            _compile(text, path)
        except (SyntaxError, ValueError) as e:
            lineno = getattr(e, "lineno", None)
            lines = text.splitlines()
            rec.update({
                "class": "output-does-not-compile", "exception": type(e).__name__,
                "message": getattr(e, "msg", str(e)), "output_line": lineno,
                "output_text": lines[lineno - 1] if lineno and 0 < lineno <= len(lines) else None,
            })
            return rec
        if not changed and text != source:
            rec.update({"class": "unchanged-file-differs",
                        "message": "no function converts, but the output differs from the input"})
            return rec
        if changed:
            ins, outs = _comments(source), _comments(text)
            if ins is not None and outs is not None and ins - outs:
                lost = sorted(ins - outs)
                rec.update({"class": "comments-lost",
                            "message": f"{len(lost)} comment(s) lost, e.g. {lost[0][:60]}"})
                return rec
        rec["class"] = "ok"
        return rec
    except _Timeout:
        rec.update({"class": "timeout", "message": f"over {timeout} s"})
        return rec
    except RecursionError as e:
        # cli._convert_one: "too deeply nested for autoflow to convert" (exit 1).
        af, last, _ = _autoflow_frame(e.__traceback__)
        rec.update({"class": "clear-user-error", "exception": "RecursionError",
                    "message": str(e), "frame": af, "last_frame": last})
        return rec
    except Exception as e:  # noqa: BLE001 - everything else is the point of the run
        af, last, line = _autoflow_frame(e.__traceback__)
        text = str(e).strip()
        rec.update({"class": "internal-error", "exception": type(e).__name__,
                    "message": text.splitlines()[0] if text else "", "frame": af,
                    "last_frame": last, "line": line,
                    "traceback": traceback.format_exc(limit=-8)})
        return rec
    finally:
        rec["seconds"] = round(time.perf_counter() - t0, 4)


def _worker(tasks, results, timeout):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    import autoflow.transforms.module  # noqa: F401 - import once, before timing
    while True:
        item = tasks.get()
        if item is None:
            return
        idx, path = item
        results.put(("start", idx, os.getpid()))
        results.put(("done", idx, convert_file(path, timeout)))


# ---------------------------------------------------------------------------
# the driver
# ---------------------------------------------------------------------------

def run(items, jobs, timeout, budget=None, log=None):
    """Convert ``items`` (``[(package, path)]``) with ``jobs`` worker processes.

    With ``budget`` (seconds), the run stops when it is spent: the files not
    converted by then get the class ``not-run``. Each failure is also
    appended to the file ``log`` as it comes (one JSON object a line).
    """
    ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    tasks, results = ctx.Queue(), ctx.Queue()
    for idx, (_, path) in enumerate(items):
        tasks.put((idx, path))
    workers = {}

    def spawn():
        p = ctx.Process(target=_worker, args=(tasks, results, timeout), daemon=True)
        p.start()
        workers[p.pid] = p

    for _ in range(jobs):
        tasks.put(None)
        spawn()
    records = [None] * len(items)
    running = {}  # pid -> (idx, start time)
    done, last_report = 0, time.time()
    hard = (timeout or 600) * 2 + 30
    started = time.time()
    while done < len(items):
        if budget is not None and time.time() - started > budget:
            for p in workers.values():
                p.kill()
            for i, rec in enumerate(records):
                if rec is None:
                    records[i] = {"file": items[i][1], "class": "not-run",
                                  "message": f"the run's {budget:.0f} s were spent"}
            done = len(items)
            workers.clear()
            break
        try:
            kind, idx, val = results.get(timeout=1.0)
        except queue.Empty:
            kind = None
        if kind == "start":
            running[val] = (idx, time.time())
        elif kind == "done":
            records[idx] = val
            done += 1
            if log is not None and val["class"] in FAILURES:
                with open(log, "a") as f:
                    f.write(json.dumps(val) + "\n")
            for pid, (i, _) in list(running.items()):
                if i == idx:
                    del running[pid]
        # Dead or hung workers: their file is a crash / timeout; start another.
        for pid, p in list(workers.items()):
            cur = running.get(pid)
            hung = cur is not None and time.time() - cur[1] > hard
            if hung:
                p.kill()
                p.join()
            if p.exitcode is None:
                continue
            del workers[pid]
            running.pop(pid, None)
            if cur is not None and records[cur[0]] is None:
                records[cur[0]] = {"file": items[cur[0]][1],
                                   "class": "timeout" if hung else "worker-crash",
                                   "message": f"worker exit code {p.exitcode}"}
                done += 1
            if p.exitcode != 0:  # it died before taking its end-of-work marker
                tasks.put(None)
                spawn()
        if not workers and kind is None:
            # Every worker has ended and nothing is left to read: whatever is
            # still missing was lost with a worker that died unannounced.
            for i, rec in enumerate(records):
                if rec is None:
                    records[i] = {"file": items[i][1], "class": "worker-crash",
                                  "message": "lost with a worker"}
                    done += 1
        if time.time() - last_report > 15:
            print(f"  {done}/{len(items)} files", file=sys.stderr, flush=True)
            last_report = time.time()
    for p in workers.values():
        p.join(timeout=5)
        if p.exitcode is None:
            p.kill()
    for (pkg, _), rec in zip(items, records):
        rec["package"] = pkg
    return records


_NORMALISE = [
    (re.compile(r"'[^']*'"), "'…'"),
    (re.compile(r'"[^"]*"'), '"…"'),
    (re.compile(r"<[^<>]* at 0x[0-9a-f]+>"), "<… at 0x…>"),
    (re.compile(r"\b\d+\b"), "N"),
]


def pattern(message):
    """The message with names, numbers and addresses blanked, for grouping."""
    for rx, repl in _NORMALISE:
        message = rx.sub(repl, message or "")
    return message


def group_key(rec):
    if rec["class"] == "output-does-not-compile":
        return (rec["class"], rec.get("exception"), pattern(rec.get("message")), None)
    return (rec["class"], rec.get("exception"), pattern(rec.get("message")), rec.get("frame"))


def _git(*args):
    try:
        return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--limit", type=int, default=None, help="convert only the first N files")
    ap.add_argument("--only", metavar="PKG", default=None,
                    help="one package: stdlib, " + ", ".join(PACKAGES))
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="per-file time limit in seconds (0: none; default 60)")
    ap.add_argument("--report", default="/tmp/corpus_report.json",
                    help="JSON report path (default /tmp/corpus_report.json)")
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="stop after this many seconds and report the files converted by then")
    ap.add_argument("--shuffle", action="store_true",
                    help="convert the files in a fixed random order (so that a run cut short by "
                         "--max-seconds covers every package)")
    ap.add_argument("--start", type=int, default=0,
                    help="skip the first N files (with --shuffle: continue a run cut short)")
    args = ap.parse_args(argv)
    if args.only is not None and args.only not in ("stdlib",) + PACKAGES:
        ap.error(f"--only: expected stdlib or one of {', '.join(PACKAGES)}")

    import autoflow
    where = os.path.dirname(os.path.abspath(autoflow.__file__))
    if where != AUTOFLOW_DIR:
        print(f"warning: autoflow imported from {where}, not {AUTOFLOW_DIR}", file=sys.stderr)
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = bool(_git("status", "--porcelain", "--", "autoflow"))
    print(f"autoflow: {where} (commit {commit or '?'}{', modified' if dirty else ''})",
          file=sys.stderr)
    items = corpus(args.only)
    if args.shuffle:
        import random
        random.Random(0).shuffle(items)
    items = items[args.start:]
    if args.limit is not None:
        items = items[:args.limit]
    print(f"corpus: {len(items)} files, {args.jobs} jobs", file=sys.stderr, flush=True)
    t0 = time.time()
    log = args.report + ".failures.jsonl"
    if os.path.exists(log):
        os.remove(log)
    records = run(items, max(1, args.jobs), args.timeout or None, args.max_seconds, log)
    wall = time.time() - t0

    by_pkg = collections.OrderedDict()
    for rec in records:
        by_pkg.setdefault(rec["package"], collections.Counter())[rec["class"]] += 1
    total = collections.Counter(rec["class"] for rec in records)
    groups = collections.defaultdict(list)
    for rec in records:
        if rec["class"] in FAILURES:
            groups[group_key(rec)].append(rec)
    ordered = sorted(groups.items(), key=lambda kv: -len(kv[1]))

    cols = [c for c in CLASSES if total[c] or c in FAILURES[:4] or c == "ok"]
    short = {"input-does-not-parse": "no-parse", "clear-user-error": "user-err",
             "internal-error": "internal", "output-does-not-compile": "bad-output",
             "unchanged-file-differs": "not-same", "comments-lost": "comments",
             "worker-crash": "crash", "not-run": "not-run"}
    head = f"{'package':<10}{'files':>7}" + "".join(f"{short.get(c, c):>11}" for c in cols)
    print(head)
    print("-" * len(head))
    for pkg, cnt in by_pkg.items():
        print(f"{pkg:<10}{sum(cnt.values()):>7}" + "".join(f"{cnt[c]:>11}" for c in cols))
    print("-" * len(head))
    print(f"{'total':<10}{len(records):>7}" + "".join(f"{total[c]:>11}" for c in cols))
    changed = sum(1 for r in records if r.get("changed"))
    same = sum(1 for r in records if r.get("changed") == 0 and r.get("identical"))
    unchanged = sum(1 for r in records if r.get("changed") == 0)
    functions = sum(r.get("changed") or 0 for r in records)
    fallbacks = [f for r in records for f in r.get("fallbacks") or []]
    print(f"\nwall time {wall:.1f} s with {args.jobs} jobs; "
          f"{changed} files had at least one function rewritten ({functions} functions)")
    print(f"files with nothing to convert: {unchanged}, output byte for byte the input: {same}")
    print(f"converted functions printed as written where unchanged: "
          f"{functions - sum(1 for f in fallbacks if f[1] == 2)} of {functions}; "
          f"expression-level printing dropped: {sum(1 for f in fallbacks if f[1] == 1)}, "
          f"statement-level too: {sum(1 for f in fallbacks if f[1] == 2)}")
    slow = sorted((r for r in records if "seconds" in r), key=lambda r: -r["seconds"])[:3]
    if slow:
        print("slowest: " + "; ".join(f"{r['file']} {r['seconds']:.2f} s" for r in slow))
    if ordered:
        print(f"\n{len(ordered)} failure groups:")
    for (cls, exc, pat, frame), recs in ordered:
        ex = recs[0]
        where = frame or (f"output line {ex.get('output_line')}" if cls.startswith("output") else "")
        print(f"  [{len(recs)}] {cls}: {exc}: {ex.get('message')}  @ {where}")
        for r in recs[:2]:
            ln = r.get("line") or r.get("output_line")
            print(f"        {r['file']}" + (f":{ln}" if ln else ""))

    report = {
        "command": [sys.executable] + sys.argv,
        "python": sys.version.split()[0],
        "autoflow": where, "autoflow_commit": commit, "autoflow_dirty_at_start": dirty,
        "jobs": args.jobs, "timeout": args.timeout, "wall_seconds": round(wall, 1),
        "files": len(records), "counts": dict(total),
        "unchanged_files": unchanged, "unchanged_files_identical": same,
        "converted_functions": functions,
        "faithful_fallbacks": [{"file": r["file"], "function": f[0], "level": f[1]}
                               for r in records for f in r.get("fallbacks") or []],
        "per_package": {k: dict(v) for k, v in by_pkg.items()},
        "groups": [{"class": cls, "exception": exc, "pattern": pat, "frame": frame,
                    "count": len(recs), "examples": [r["file"] for r in recs[:5]]}
                   for (cls, exc, pat, frame), recs in ordered],
        "failures": [r for r in records if r["class"] in FAILURES + ("clear-user-error",)],
        "input_does_not_parse": [{"file": r["file"], "message": r.get("message")}
                                 for r in records if r["class"] == "input-does-not-parse"],
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.report)), exist_ok=True)
    with open(args.report, "w") as f:
        json.dump(report, f, indent=1)
    print(f"\nreport: {args.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
