"""The ``autoflow`` command line: ``convert``, ``check``, ``explain``, ``run`` and ``doctor``.

``convert`` and ``check`` read and parse files only: they never import or run
them, and never import JAX. ``explain`` imports the file (running its
top-level code) and traces one function with JAX. ``doctor`` says which of JAX's
private paths autoflow takes on the JAX installed (``runtime/jax/paths.py``, ``PATHS``).

Exit status: 0 success; 1 an input cannot be read or parsed (``check``: or a
statement cannot convert or fails when traced, or a warning says the program fails, or
``--strict`` and any warning; ``explain``: or the function cannot be traced); 2
usage errors; 3 an internal error, which is an autoflow bug.
"""

from __future__ import annotations

import argparse
import ast
import errno
import inspect
import os
import sys
import warnings

from ._cli_io import (InputError, _colorize, _diff, _display_name, _error, _functions, _original_segment, _reading,
                      _syntax_error, _use_color, _write, read_source, read_source_encoding)


EXIT_OK, EXIT_INPUT, EXIT_USAGE, EXIT_BUG = 0, 1, 2, 3
_BUG = "an autoflow bug; please report it"


class _Bug(Exception):
    """An unexpected internal error while processing one input."""

    def __init__(self, name, exc):
        super().__init__(f"{name}: internal error ({_BUG}): {_exc_line(exc)}")


def _exc_line(exc) -> str:
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


# ---------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------

def _convert_one(path, args):
    from .core.deep import run_deep
    from .transforms.module import convert_module

    name = _display_name(path)
    source, as_read = read_source_encoding(path, bom=path != "-")
    written = source  # (printed as it is, byte order mark included, where nothing converts)
    encoding = "utf-8" if as_read == "utf-8-sig" else as_read
    # Work on "\n" lines; a file written with "\r\n" throughout gets them back.
    crlf = "\r\n" in source and source.count("\r\n") == source.count("\n")
    source = source.replace("\r\n", "\n")
    try:
        with _reading(name, source, args.function), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            text, changed = run_deep(convert_module, source, name, only=args.function)
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001
        raise _Bug(name, e) from None
    before = source
    if args.function is not None:
        before = _original_segment(source, args.function) or ""
        if args.function not in changed:
            text = before  # unchanged: print it exactly as written
    if args.diff:
        text = _diff(before, text, name)
    elif not changed and args.function is None:
        # nothing to convert: the file as it is, byte for byte (its mixed line endings,
        # its UTF-8 byte order mark)
        return written, as_read
    elif crlf:
        text = text.replace("\n", "\r\n")
    return text, encoding


def cmd_convert(args) -> int:
    outputs, status = [], EXIT_OK
    for path in args.files:
        try:
            outputs.append((path, *_convert_one(path, args)))
        except InputError as e:
            _error(str(e))
            status = max(status, EXIT_INPUT)
        except _Bug as e:
            _error(str(e))
            status = max(status, EXIT_BUG)
    if status != EXIT_OK:
        return status  # nothing on standard output unless every input converted
    color = _use_color(args.color, sys.stdout)
    chunks = []
    for path, text, encoding in outputs:
        if len(outputs) > 1 and not args.diff:
            text = f"# ==> {_display_name(path)} <==\n{text}" + ("" if text.endswith("\n") else "\n")
        if text and color:
            text = _colorize(text, "diff" if args.diff else "python")
        # Each file keeps its own encoding (a `# coding: latin-1` file stays latin-1).
        chunks.append(text.encode(encoding, errors="surrogateescape"))
    _write(b"".join(chunks))
    return EXIT_OK


def cmd_check(args) -> int:
    from . import check

    reports, status = [], EXIT_OK
    for path in args.files:
        name = _display_name(path)
        try:
            source = read_source(path)
            with _reading(name, source, args.function):
                static = _static_table(source, args.static)
                findings = check.check_source(source, name, only=args.function, static=static)
        except InputError as e:
            _error(str(e))
            status = max(status, EXIT_INPUT)
            continue
        except Exception as e:  # noqa: BLE001
            _error(str(_Bug(name, e)))
            status = max(status, EXIT_BUG)
            continue
        found = _pitfalls(source, name, args.function, static)
        reports.append(check.report(findings, name, found))
        if found and args.strict or any(p.code in check.FAILING_CODES for p in found):
            status = max(status, EXIT_INPUT)  # (a warning that says the program fails)
        if any(f.status == check.INTERNAL for f in findings):
            status = max(status, EXIT_BUG)
        elif not all(f.ok for f in findings):
            status = max(status, EXIT_INPUT)
    _write("".join(reports))
    return status


def _static_table(source, names):
    """``--static NAME``: function name -> the parameters so named, for every function."""
    wanted = {n.strip() for item in names or () for n in item.split(",") if n.strip()}
    if not wanted:
        return None
    return {q.rsplit(".", 1)[-1]: wanted for q, _ in _functions(source)}


def _pitfalls(source, name, function=None, static=None):
    """The classic jit pitfalls in ``source`` (``autoflow.pitfalls``); with
    ``function`` (``Class.method``), only those inside that function."""
    from . import pitfalls

    try:
        found = pitfalls.find(source, name, static=static)
        if function is None or not found:
            return found
        node = _function_node(ast.parse(source), function.split("."))
        if node is None:
            return []
        return [p for p in found if node.lineno <= p.line <= node.end_lineno]
    except (SyntaxError, ValueError, RecursionError):
        return []


def _function_node(tree, parts):
    body = tree.body
    node = None
    for part in parts:
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                         ast.ClassDef)) and n.name == part), None)
        if node is None:
            return None
        body = node.body
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _user_frame(tb, path):
    """``path:line`` of the innermost traceback entry in the file ``path``, or None."""
    import traceback

    abspath = os.path.abspath(path)
    for fr in reversed(traceback.extract_tb(tb)):
        if os.path.abspath(fr.filename) == abspath:
            return f"{path}:{fr.lineno}"
    return None


def _is_bug(exc) -> bool:
    """An exception autoflow raised that is not one of its user-facing errors."""
    from .errors import AutoflowError

    return type(exc).__module__.split(".")[0] == "autoflow" and not isinstance(exc, AutoflowError)


def _import_file(path):
    import importlib.util

    abspath = os.path.abspath(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    modname = stem if stem.isidentifier() and stem not in sys.modules else "__autoflow_explain__"
    spec = importlib.util.spec_from_file_location(modname, abspath)
    if spec is None or spec.loader is None:
        raise InputError(f"{path}: cannot be imported (not a Python file?)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    sys.path.insert(0, os.path.dirname(abspath))
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        same = e.filename and os.path.abspath(e.filename) == abspath
        raise _syntax_error(path if same or not e.filename else e.filename, e) from None
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the user's code failed
        if _is_bug(e):
            raise _Bug(path, e) from None
        where = _user_frame(e.__traceback__, path) or path
        raise InputError(f"{where}: error while importing it: {_exc_line(e)}") from None
    return module


def cmd_explain(args) -> int:
    target = args.target
    path, sep, qualname = target.rpartition(":")
    if not sep or not path or not qualname:
        _error(f"autoflow explain: error: expected FILE:FUNCTION, got {target!r}")
        return EXIT_USAGE
    from .explain import parse_cli_arg

    try:
        call_args = [parse_cli_arg(a) for a in args.args]
    except ValueError as e:
        _error(f"autoflow explain: error: {e}")
        return EXIT_USAGE
    try:
        read_source(path)  # the same checks (and messages) as convert, before importing
        module = _import_file(path)
        obj = module
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is None or not callable(obj):
            raise InputError(f"{path}: no function named {qualname!r}")
        if inspect.iscoroutinefunction(obj) or inspect.isasyncgenfunction(obj):
            raise InputError(f"{path}: {qualname} is an `async def` function: autoflow does "
                             "not convert it, and jit cannot trace a coroutine (explain the "
                             "function it awaits instead)")
    except InputError as e:
        _error(str(e))
        return EXIT_INPUT
    except _Bug as e:
        _error(str(e))
        return EXIT_BUG

    from .errors import AutoflowError
    from .explain import explain

    try:
        text = str(explain(obj, *call_args, hlo=args.hlo))
    except AutoflowError as e:
        # Already compiler style: file:line:col, the source line, a caret, what to do.
        _error(str(e).replace(os.path.abspath(path) + ":", path + ":"))
        return EXIT_INPUT
    except Exception as e:  # noqa: BLE001 - tracing the user's code failed
        if _is_bug(e):
            _error(str(_Bug(path, e)))
            return EXIT_BUG
        where = _user_frame(e.__traceback__, path) or path
        _error(f"{where}: error while tracing {qualname}: {_exc_line(e)}")
        return EXIT_INPUT
    _write(text)
    return EXIT_OK


# ---------------------------------------------------------------------------
# the parser
# ---------------------------------------------------------------------------

_EXIT_HELP = """exit status: 0 success; 1 an input cannot be read or parsed%s;
2 usage error; 3 internal error (an autoflow bug)"""


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="autoflow", allow_abbrev=False,
        description="Convert Python control flow (if/while/for, break/continue/return) in JAX "
                    "functions into lax control flow.",
        epilog="`convert` and `check` only read and parse files: they never import or run them.")
    parser.add_argument("--version", action="version", version=f"autoflow {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    conv = sub.add_parser(
        "convert", allow_abbrev=False, formatter_class=argparse.RawDescriptionHelpFormatter,
        help="print the converted source of FILEs (never imports or runs them)",
        description="Print each FILE with every function whose control flow changes rewritten "
                    "and everything else as it was. The files are read and parsed only, never "
                    "imported or run. `-` reads standard input.",
        epilog=_EXIT_HELP % "")
    conv.add_argument("files", nargs="+", metavar="FILE", help="a Python file, or - for stdin")
    conv.add_argument("--function", metavar="NAME",
                      help="print only this function (Class.method for a method)")
    conv.add_argument("--diff", action="store_true",
                      help="print a unified diff against the original instead")
    conv.add_argument("--color", "--colour", choices=("auto", "always", "never"), default="auto",
                      help="colour the output (needs pygments for code); auto: only on a "
                           "terminal and when NO_COLOR is not set (default: auto)")
    conv.set_defaults(handler=cmd_convert)

    chk = sub.add_parser(
        "check", allow_abbrev=False, formatter_class=argparse.RawDescriptionHelpFormatter,
        help="report what each if/while/for becomes, and what cannot convert",
        description="For every control-flow statement of each FILE: its line, its kind, what it "
                    "becomes when its condition is traced (lax.cond, lax.while_loop, "
                    "lax.fori_loop...), the variables it carries, and why it would fall back "
                    "to Python or fail; and the classic jit pitfalls, as warnings, in line "
                    "order. A function is read as `autoflow.jit` traces it at its first call "
                    "with traced arguments: what check says fails raises there, what it says "
                    "converts traces. The files are read and parsed only, never imported or "
                    "run. `-` reads standard input.",
        epilog=_EXIT_HELP % (" or a statement cannot convert or fails when traced, or a "
                             "warning says the program fails (AF102, AF103, AF108-AF113), or "
                             "--strict and any warning"))
    chk.add_argument("files", nargs="+", metavar="FILE", help="a Python file, or - for stdin")
    chk.add_argument("--function", metavar="NAME", help="check only this function")
    chk.add_argument("--static", action="append", metavar="NAME[,NAME...]",
                     help="parameters that are static (as with `static_argnames`) in the "
                          "functions checked; by default every parameter without a default "
                          "value is taken as traced, unless a `jit` in the file marks it static")
    chk.add_argument("--strict", action="store_true",
                     help="exit with status 1 when there are warnings (classic jit pitfalls: "
                          "AF101..AF113; silence one on its line with "
                          "`# autoflow: ignore[AF104]`)")
    chk.set_defaults(handler=cmd_check)

    exp = sub.add_parser(
        "explain", allow_abbrev=False, formatter_class=argparse.RawDescriptionHelpFormatter,
        help="trace FILE:FUNCTION and show what its control flow lowered to "
             "(imports FILE, running its top-level code)",
        description="Import FILE (this RUNS its top-level code, as `python -c 'import ...'` "
                    "would), trace the converted FUNCTION with abstract arguments of the "
                    "given shapes, and print what each control-flow statement lowered to "
                    "(python, lax.cond, lax.while_loop, lax.fori_loop...), then the jaxpr.",
        epilog="argument specs: DTYPE or DTYPE[d0,d1,...] with DTYPE one of bool, f16, bf16, "
               "f32, f64, i8, i16, i32, i64, u8, u16, u32, u64, c64, c128 (e.g. f32[3], i32, "
               "f32[2,2], bool) are traced; a Python literal (50, 1e-6, True, None) is passed "
               "as a concrete value.\n\n" + _EXIT_HELP % " or imported, or FUNCTION cannot be "
               "traced")
    exp.add_argument("target", metavar="FILE:FUNCTION",
                     help="the file and the function in it (Class.method for a method)")
    exp.add_argument("--args", nargs="*", default=[], metavar="SPEC",
                     help="one per positional argument: a spec (f32[3], i32, bool) or a literal")
    exp.add_argument("--hlo", action="store_true",
                     help="also print the lowered StableHLO text")
    exp.set_defaults(handler=cmd_explain)

    run_p = sub.add_parser(
        "run", allow_abbrev=False,
        help="run SCRIPT with its functions, and the modules next to it, converted",
        description="Run SCRIPT as `python SCRIPT ARGS...` would, with every function of the "
                    "script and of the modules in its directory converted when they are "
                    "imported (like `python -m cProfile`): library code that calls them "
                    "(Equinox, Flax, diffrax, optax) then runs converted code.")
    run_p.add_argument("script", metavar="SCRIPT", help="the Python script to run")
    run_p.add_argument("script_args", nargs=argparse.REMAINDER, metavar="ARGS",
                       help="arguments passed to SCRIPT")
    run_p.add_argument("--strict", action="store_true",
                       help="every fallback to unconverted code is an error")
    run_p.set_defaults(handler=cmd_run)

    doc = sub.add_parser(
        "doctor", allow_abbrev=False,
        help="print the Python, JAX and jaxlib versions and which of JAX's private paths "
             "autoflow takes on this JAX",
        description="Print the Python, JAX and jaxlib versions, then each private path "
                    "autoflow takes through JAX (autoflow/runtime/jax/paths.py, PATHS) on "
                    "or off; for one that is off, why, the public path autoflow takes instead "
                    "and what is lost. Runs autoflow's full self-check (a few seconds: it "
                    "compiles a tiny program under jit, vmap, grad and jvp).",
        epilog="exit status: 0 (whatever is off: the public path runs there); 3 internal "
               "error (an autoflow bug)")
    doc.set_defaults(handler=cmd_doctor)
    return parser


def cmd_doctor(args) -> int:
    """``autoflow doctor``: this JAX's private paths, on or off and why."""
    import platform

    try:
        import jax
    except ImportError as e:
        _write(f"Python {platform.python_version()}; JAX is not installed ({e}).\n")
        return EXIT_OK
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from .runtime.jax import selfcheck

            text = selfcheck.doctor()
    except ImportError as e:  # a JAX without what autoflow cannot do without
        text = f"Python {platform.python_version()}, JAX {jax.__version__}\n{e}"
    _write(text + "\n")
    return EXIT_OK


def cmd_run(args) -> int:
    """``autoflow run SCRIPT ARGS...``: the script's own errors print as Python's would."""
    import traceback

    from .hooks import run_script

    if os.path.isdir(args.script):
        main = os.path.join(args.script, "__main__.py")
        if not os.path.isfile(main):
            _error(f"autoflow: {args.script}: is a directory, with no __main__.py to run")
            return EXIT_INPUT
        args.script = main  # (as `python DIR` runs DIR/__main__.py)
    if not os.path.isfile(args.script):
        _error(f"autoflow: {args.script}: no such file")
        return EXIT_INPUT
    options = {"strict": True} if args.strict else {}
    try:
        source = read_source(args.script)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(source, args.script, "exec", dont_inherit=True)
    except InputError as e:
        _error(f"autoflow: {e}")
        return EXIT_INPUT
    except (SyntaxError, ValueError) as e:  # (as `convert` and `check` say it: one line)
        _error(f"autoflow: {_syntax_error(_display_name(args.script), e)}"
               if isinstance(e, SyntaxError) else f"autoflow: {args.script}: {e}")
        return EXIT_INPUT
    try:
        run_script(args.script, args.script_args, **options)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Exception as e:  # the user's program failed: its traceback, as Python prints it
        from ._jitted import without_own_frames  # (not autoflow's own frames)

        traceback.print_exception(type(e), e, without_own_frames(e.__traceback__))
        return EXIT_INPUT
    return EXIT_OK


def _main(argv) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


def main(argv=None) -> int:
    """Run the command line; returns the exit status (never raises, except ``SystemExit``)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        _error("autoflow: interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (`autoflow convert f.py | head`): stop quietly.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return EXIT_INPUT
    except SystemExit:
        raise
    except OSError as e:
        if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG):
            return _internal_error(e)
        # (writing the output failed: `autoflow convert f.py > /dev/full`)
        try:
            _error(f"autoflow: cannot write the output: {e.strerror or e}")
        except Exception:  # noqa: BLE001
            pass
        return EXIT_INPUT
    except BaseException as e:  # noqa: BLE001 - never a traceback
        return _internal_error(e)


def _internal_error(e) -> int:
    if os.environ.get("AUTOFLOW_TRACEBACK", "") not in ("", "0"):
        raise e
    try:
        _error(f"autoflow: internal error ({_BUG}): {_exc_line(e)}")
    except Exception:  # noqa: BLE001
        pass
    return EXIT_BUG


if __name__ == "__main__":
    sys.exit(main())
