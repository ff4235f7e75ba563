def nonscalar_if(x):
    if x > 0:  # ERROR
        x = x + 1
    return x


def nonscalar_while(x):
    while x < 10:  # ERROR
        x = x + 1
    return x


def walrus_after_traced_operand(x):
    if x > 0 and (y := x * 2) > 1:  # ERROR
        return y
    return x


counter = 0


def global_write_under_traced_if(x):
    global counter
    if x > 0:  # ERROR
        counter = counter + 1
    return x


def filter_in_comprehension(xs):
    # (a list kept as a list: its length would be traced; `sum([...])` of it
    # is a masked reduction, tests/test_vocabulary_tail.py)
    doubled = [x * 2 for x in xs if x > 0]  # ERROR
    return doubled
