"""A function's source parsed from the lines of its own statement
(``core.parsing._own_statement``) is the node a parse of its whole file gives,
on every layout that can mislead a reading by indentation; where the lines
alone cannot tell, the whole file is parsed instead (issue 19: first calls).
"""

from __future__ import annotations

import importlib.util
import linecache

import gast
import pytest

from autoflow.core import parsing

SOURCE = '''\
import functools


def plain(x):
    return x + 1


def black_style(
    x,
    y=2,
):
    return x * y


@functools.lru_cache(
    maxsize=None,
)
def decorated(x):
    return x - 1


def text_at_column_zero(x):
    s = """a string
def not_a_function():
    pass
"""
    return x, s


def comment_and_brackets(x):
    y = [1,
2]
# a comment at column zero
    return x + sum(y)


def continued(x):
    y = 1 + \\
2
    return x + y


def dead_code(x):
    return x
    x = 3  # no bytecode: after a return


def outer(x):
    def inner(y):
        return y * 2
    return inner(x)


class K:
    @staticmethod
    def method(x):
        return x + 10


TABLE = {
    "neg": lambda v: -v,
    "sq": lambda v: v * v,
}


def holds_lambdas(x):
    f = (lambda a: a + 1,
         lambda b: b - 1)
    return f


def last(x):
    return x'''


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("own") / "layouts.py"
    path.write_text(SOURCE)  # (no newline at the end: the last line too)
    spec = importlib.util.spec_from_file_location("own_statement_layouts", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _functions(m):
    return [m.plain, m.black_style, m.decorated.__wrapped__, m.text_at_column_zero,
            m.comment_and_brackets, m.continued, m.dead_code, m.outer,
            m.outer.__code__.co_consts, m.K.method, m.TABLE["neg"], m.TABLE["sq"],
            m.holds_lambdas(0)[0], m.holds_lambdas(0)[1], m.last]


def _node(code, whole):
    parsing._modules.clear()
    parsing._statements.clear()
    lines = linecache.getlines(code.co_filename)
    if whole:
        parsing._parsed(code.co_filename, lines)
    node = parsing._from_module(code)
    return gast.dump(node, include_attributes=True)


def _codes(m):
    for f in _functions(m):
        if isinstance(f, tuple):  # outer's nested `inner`
            yield next(c for c in f if hasattr(c, "co_name") and c.co_name == "inner")
        else:
            yield f.__code__


def test_each_layout_gives_the_whole_files_node(module):
    for code in _codes(module):
        assert _node(code, whole=False) == _node(code, whole=True), code.co_name


def test_what_the_lines_alone_cannot_tell_is_parsed_whole(module):
    told = {}
    for code in _codes(module):
        parsing._modules.clear()
        parsing._statements.clear()
        parsing._from_module(code)
        told[(code.co_name, code.co_firstlineno)] = not parsing._modules
    by_name = {}
    for (name, _), own in told.items():
        by_name.setdefault(name, []).append(own)
    # a string or a bracket with lines at the column of the `def`: the whole file
    assert by_name["text_at_column_zero"] == [False]
    assert by_name["comment_and_brackets"] == [False]
    assert by_name["continued"] == [False]
    # everything else from its own lines
    for name in ("plain", "black_style", "decorated", "dead_code", "outer", "inner", "method",
                 "last"):
        assert by_name[name] == [True], (name, told)
    assert by_name["<lambda>"] == [True] * 4, told


def test_a_tab_indented_function_is_parsed_whole(tmp_path):
    path = tmp_path / "tabs.py"
    path.write_text("def f(x):\n\ty = x + 1\n\treturn y\n")
    spec = importlib.util.spec_from_file_location("own_statement_tabs", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    own = _node(mod.f.__code__, whole=False)
    assert own == _node(mod.f.__code__, whole=True)
    parsing._modules.clear()
    parsing._statements.clear()
    parsing._from_module(mod.f.__code__)
    assert parsing._modules  # parsed whole


def test_a_file_parsed_whole_is_not_parsed_again(module):
    parsing._modules.clear()
    parsing._statements.clear()
    lines = linecache.getlines(module.plain.__code__.co_filename)
    parsing._parsed(module.plain.__code__.co_filename, lines)
    parsing._from_module(module.black_style.__code__)
    assert not parsing._statements.get(module.plain.__code__.co_filename, (None, {}))[1]
