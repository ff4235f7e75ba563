"""Statements `autoflow check` must flag (and a few it must not)."""


def returns_in_try(x):
    try:
        if x > 0:
            return x
    finally:
        pass
    return -x


def returns_in_with(x, lock):
    with lock:
        if x > 0:
            return 1.0
    return 0.0


def assigned_in_one_branch(x):
    if x > 0:
        y = "big"  # (a number would run: its unbound read raises when the code runs)
    return y


def dispatch(x, mode):
    match mode:
        case "double":
            x = 2 * x
        case _:
            pass
    return x


def countdown(n):
    while n > 0:
        yield n
        n -= 1


def fine(x, xs):
    for v in [1, 2, 3]:
        x = x + v
    for row in xs:
        x = x + row.sum()
    return x if x > 0 else -x
