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
