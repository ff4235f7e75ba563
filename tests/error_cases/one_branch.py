def one_branch(x):
    if x > 0:  # ERROR
        y = x * 2
    return y + 1


def one_branch_other_side(x):
    if x > 0:  # ERROR
        pass
    else:
        z = x - 1
    return z


def read_unassigned(x, flag):
    if flag:
        y = x * 2
    return y + 1  # ERROR


def label_on_one_branch(x):
    if x > 0:  # ERROR
        label = "positive"
    return label


def label_on_other_branch(x):
    if x > 0:  # ERROR
        pass
    else:
        label = "negative"
    return label
