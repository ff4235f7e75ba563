def nonscalar_if(x):
    if x > 0:  # ERROR
        x = x + 1
    return x


def nonscalar_while(x):
    while x < 10:  # ERROR
        x = x + 1
    return x
