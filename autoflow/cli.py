"""The ``autoflow`` command line (minimal: ``autoflow convert FILE``)."""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="autoflow", description="Convert Python control flow "
                                     "into JAX lax control flow.")
    sub = parser.add_subparsers(dest="command", required=True)
    conv = sub.add_parser("convert", help="print the converted code of FILE (never runs FILE)")
    conv.add_argument("files", nargs="+", metavar="FILE")
    conv.add_argument("--function", metavar="NAME")
    args = parser.parse_args(argv)
    from .transforms.module import convert_module

    status = 0
    for path in args.files:
        try:
            if path == "-":
                text = sys.stdin.read()
            else:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            out, _ = convert_module(text, path, only=args.function)
        except FileNotFoundError:
            print(f"{path}: no such file", file=sys.stderr)
            status = 1
            continue
        except IsADirectoryError:
            print(f"{path}: is a directory", file=sys.stderr)
            status = 1
            continue
        except UnicodeDecodeError:
            print(f"{path}: not valid UTF-8", file=sys.stderr)
            status = 1
            continue
        except SyntaxError as e:
            print(f"{path}:{e.lineno}:{e.offset}: SyntaxError: {e.msg}", file=sys.stderr)
            status = 1
            continue
        except LookupError:
            print(f"{path}: no function named {args.function!r}", file=sys.stderr)
            status = 1
            continue
        sys.stdout.write(out)
    return status


if __name__ == "__main__":
    sys.exit(main())
