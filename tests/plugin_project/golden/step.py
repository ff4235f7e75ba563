def step(x):
    if x > 0:
        x = x * 2.0
    return x
