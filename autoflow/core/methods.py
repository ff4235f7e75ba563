"""Names of the methods of values: what a call like ``x.sum()`` may be.

Kept here, beside the other source-level facts of the rewriter, so that the
passes and their helpers (``transforms.calls``, ``transforms.util``) read it
from one place below both of them, without importing each other.
"""

# Methods of JAX/NumPy arrays and of Python's numbers, strings and containers.
VALUE_METHODS = frozenset("""
    T add addressable_data addressable_shards all any append argmax argmin argpartition argsort
    as_integer_ratio astype at aval base bit_count bit_length block_until_ready byteswap
    capitalize casefold center choose clear clip clone committed compress conj conjugate copy
    copy_to_host_async count ctypes cumprod cumsum data decode delete denominator device
    devices diagonal difference difference_update discard dot dtype dump dumps encode endswith
    expandtabs extend fill find flags flat flatten format format_map from_bytes fromhex
    fromkeys get getfield global_shards hex imag index insert intersection intersection_update
    is_deleted is_fully_addressable is_fully_replicated is_integer is_ready isalnum isalpha
    isascii isdecimal isdigit isdisjoint isidentifier islower isnumeric isprintable isspace
    issubset issuperset istitle isupper item items itemsize join keys ljust lower lstrip mT
    maketrans max mean min nbytes ndim nonzero numerator partition platform pop popitem prod
    ptp put ravel real remove removeprefix removesuffix repeat replace reshape resize reverse
    rfind rindex rjust round rpartition rsplit rstrip searchsorted setdefault setfield
    setflags shape sharding size sort split splitlines squeeze startswith std strides strip
    sum swapaxes swapcase symmetric_difference symmetric_difference_update take title
    to_bytes to_device tobytes tofile tolist trace translate transpose union update upper
    values var view zfill""".split())

# Methods that change a list, dict, set or deque in place (the state a converted
# statement carries: `analysis.activity.shared_state`).
MUTATING_METHODS = frozenset(
    "append extend insert pop remove clear update setdefault popitem sort reverse add "
    "discard difference_update intersection_update symmetric_difference_update "
    "appendleft extendleft popleft rotate".split())
# Those and a NumPy array's (`a.fill(0)`): a call of one is not a pure computation.
IN_PLACE_METHODS = MUTATING_METHODS | frozenset("fill put resize setfield setflags".split())
# Python's builtins that change state or advance an iterator.
STATEFUL_BUILTINS = frozenset("next setattr delattr exec eval input open".split())
