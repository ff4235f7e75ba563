"""Ordinary code with no traced control flow: what the import hook converts anyway."""

import math


def collatz(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def primes(limit):
    out = []
    for k in range(2, limit):
        prime = True
        for d in out:
            if d * d > k:
                break
            if k % d == 0:
                prime = False
                break
        if prime:
            out.append(k)
    return out


def newton_sqrt(a, tol=1e-12):
    x = a if a > 1 else 1.0
    while abs(x * x - a) > tol * a:
        x = 0.5 * (x + a / x)
    return x


def describe(xs):
    stats = {"n": 0, "pos": 0, "neg": 0}
    for v in xs:
        stats["n"] += 1
        if v > 0:
            stats["pos"] += 1
        elif v < 0:
            stats["neg"] += 1
    return stats


class Accumulator:
    def __init__(self):
        self.total = 0.0
        self.count = 0

    def add(self, v):
        if v != v:   # NaN
            return
        self.total += v
        self.count += 1

    def mean(self):
        return self.total / self.count if self.count else math.nan


def workload():
    acc = Accumulator()
    for n in range(1, 300):
        acc.add(collatz(n))
    s = sum(newton_sqrt(float(k)) for k in range(1, 200))
    d = describe([math.sin(k) for k in range(500)])
    return acc.mean(), len(primes(2000)), s, d["pos"]
