"""Value tokens of a block of line protocol read a column at a time, exactly as the strict
decoder reads each one, with numpy array operations instead of a Python call per token.

A token is given by where it starts and ends in the block's bytes. The readers vouch only for
the plainest spellings and say which tokens they vouched for; any other token is read by
:func:`read_one`, which is the strict decoder's own reading, and a token it refuses sends its
line to the strict decoder. Why the plain spellings read exactly as Python reads them:

* an int (``-?[0-9]{1,18}i``) or a timestamp (``[0-9]{1,19}``) is a sum of digits times
  powers of ten, exact: summed as floats in parts below 2**53, then joined in 64-bit ints;
* a float (``-?[0-9]*.?[0-9]*`` with 1 to 14 digits) is ``m / 10**r``, where the digits make
  the integer ``m < 2**53`` and ``r`` is the count of digits after the point: both are exact
  doubles, so the one division is correctly rounded, as ``float()`` is (Clinger's fast path).

>>> raw = b"x 12.5 -3i 07i 1e5"
>>> read_numbers(raw, np.array([2]), np.array([6]), "float")
(array([12.5]), array([ True]))
>>> read_numbers(raw, np.array([7, 11]), np.array([10, 14]), "int")
(array([-3,  7]), array([ True,  True]))
>>> read_numbers(raw, np.array([15]), np.array([18]), "float")  # left to read_one: 1e5
(array([100000.]), array([ True]))
"""

from __future__ import annotations

import numpy as np

from reflex_localize.schemas.codec import MAX_TIME_NS

# Enough for any token a reader vouches for; longer ones are read by read_one. A block's bytes
# carry this much padding before and after, so that a window of this width fits anywhere.
PAD = 256
# The words the strict decoder reads as booleans (codec._parse_value).
BOOLS = {w: True for w in ("t", "T", "true", "True", "TRUE")} | {
    w: False for w in ("f", "F", "false", "False", "FALSE")
}
_POW10 = 10.0 ** np.arange(24)  # exact up to 10**22; digit sums below 2**53 are exact too
_LOW_DIGITS = 9  # long numbers are summed in two parts, each exact as a float
# Most digits a spelling may have: a float's must make m < 2**53 (the point is a zero digit).
_MOST_DIGITS = {"float": 14, "int": 18, "time": 19}
# Tokens are read in bands of length, so that the byte matrices stay narrow; a band's width
# is a whole count of bytes of one unsigned int type, so that a row of flags is one number.
_BAND_ENDS = np.array([0, 1, 2, 4, 8, 16, 24])  # a band: lengths above one end, up to the next


def windows(raw: bytes | memoryview, width: int) -> np.ndarray:
    """Every ``width`` bytes of ``raw`` as one array, with no copy: item p is raw[p:p + width]."""
    return np.ndarray((len(raw) - width + 1,), f"S{width}", raw, 0, (1,))


def byte_matrix(raw: bytes | memoryview, first: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` bytes from each of ``first`` as the rows of a uint8 matrix."""
    return windows(raw, width)[first].view(np.uint8).reshape(len(first), width)


def read_numbers(
    raw: bytes, starts: np.ndarray, ends: np.ndarray, kind: str
) -> tuple[np.ndarray, np.ndarray]:
    """The tokens ``raw[starts[i]:ends[i]]`` read as a field of type ``kind`` ("float", "int")
    or as the timestamp ("time"), and which of them the strict decoder would accept so."""
    lengths = ends - starts
    values = np.zeros(len(ends), np.float64 if kind == "float" else np.int64)
    ok = np.zeros(len(ends), bool)
    if kind == "int":  # the "i" suffix goes; any other spelling is left to read_one
        suffixed = np.frombuffer(raw, np.uint8)[ends - 1] == ord("i")
        ends, lengths = ends - 1, np.where(suffixed, lengths - 1, 0)
    # Each token's band (0: empty; past the last: too long to vouch for), then the tokens
    # sorted by band with a radix sort, so that each band is one slice.
    band = np.searchsorted(_BAND_ENDS, lengths).astype(np.uint8)
    order = np.argsort(band, kind="stable")
    bounds = np.cumsum(np.bincount(band, minlength=len(_BAND_ENDS) + 1))
    for number, high in enumerate(_BAND_ENDS[1:].tolist(), 1):
        chosen = order[bounds[number - 1] : bounds[number]]
        if len(chosen):
            matrix = byte_matrix(raw, ends[chosen] - high, high)
            values[chosen], ok[chosen] = _read_digits(matrix, lengths[chosen], kind)
    return _with_the_rest(raw, starts, ends if kind != "int" else ends + 1, kind, values, ok)


def _read_digits(matrix: np.ndarray, lengths: np.ndarray, kind: str) -> tuple[np.ndarray, ...]:
    """Right-aligned tokens (the rows of ``matrix``, ``lengths`` long) as numbers, and which
    are spelt plainly enough to vouch for. Nothing here reduces along a row (numpy is slow at
    that): a row of flags is read as one or a few unsigned ints."""
    rows, width = matrix.shape
    if width == 1:  # one digit ("0i" is most of a capture's ints): nothing else to check
        digit = matrix[:, 0] - np.uint8(48)
        return digit.astype(np.float64 if kind == "float" else np.int64), digit < 10
    lead_column = width - lengths
    everywhere = np.arange(rows)
    inside = np.arange(width) >= lead_column[:, None]
    digits = matrix - np.uint8(48)
    odd = (digits >= 10) & inside
    negative = (matrix[everywhere, lead_column] == ord("-")) & (kind != "time")
    odd[everywhere, lead_column] &= ~negative
    count = lengths - negative
    points = np.zeros(rows, np.int64)
    if kind == "float":
        is_point = (matrix == ord(".")) & inside
        odd &= ~is_point
        points = _row_counts(is_point)
        count = count - points
    ok = ~_row_counts(odd).astype(bool) & (count >= 1) & (count <= _MOST_DIGITS[kind])
    digits *= (digits < 10) & inside  # the point, the sign and what precedes the token: zeros
    if kind == "float":
        ok &= points <= 1
        spread = digits @ _POW10[width - 1 :: -1]  # the point counts as a zero digit
        after = width - 1 - (is_point @ np.arange(width, dtype=np.float64)).astype(np.int64)
        scale = _POW10[np.where(points == 1, after, 0)]
        fraction = np.fmod(spread, scale)
        number = np.where(points == 1, (spread - fraction) / 10 + fraction, spread) / scale
        return np.where(negative, -number, number), ok
    whole = _exact_sum(digits)
    if kind == "int":
        return np.where(negative, -whole, whole), ok
    return whole, ok & (whole >= 0) & (whole <= MAX_TIME_NS)  # past 2**63 it wraps below 0


def _row_counts(flags: np.ndarray) -> np.ndarray:
    """How many of each row's flags are set (rows of 1, 2, 4 or a multiple of 8 flags). Each
    flag is a byte 0 or 1, so multiplying a word by 0x0101... adds its bytes up into the top
    byte (what np.bitwise_count does, which numpy 1.26 lacks)."""
    width = flags.shape[1]
    size = min(width, 8)
    words = flags.view(np.dtype(f"<u{size}")).reshape(len(flags), -1)
    ones = words.dtype.type(int.from_bytes(b"\x01" * size, "little"))
    shift = words.dtype.type(8 * (size - 1))
    total = (words[:, 0] * ones) >> shift
    for column in range(1, words.shape[1]):
        total += (words[:, column] * ones) >> shift  # at most 24 flags: no byte overflows
    return total.astype(np.int64)


def _exact_sum(digits: np.ndarray) -> np.ndarray:
    """Rows of digits (right-aligned) as int64, exactly: each float sum stays below 2**53."""
    width = digits.shape[1]
    if width <= 15:
        return (digits @ _POW10[width - 1 :: -1]).astype(np.int64)
    high = (digits[:, :-_LOW_DIGITS] @ _POW10[width - _LOW_DIGITS - 1 :: -1]).astype(np.int64)
    low = (digits[:, -_LOW_DIGITS:] @ _POW10[_LOW_DIGITS - 1 :: -1]).astype(np.int64)
    with np.errstate(over="ignore"):
        return high * 10**_LOW_DIGITS + low


def read_bools(raw: bytes, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, ...]:
    """The tokens read as a bool field, and which the strict decoder would accept so."""
    lengths = ends - starts
    words = byte_matrix(raw, starts, 5)
    words[np.arange(5) >= lengths[:, None]] = 0
    spelt = words.view("S5").ravel()
    true = spelt == b"true"
    ok = true | (spelt == b"false")
    return _with_the_rest(raw, starts, ends, "bool", true, ok & (lengths <= 5))


def _with_the_rest(
    raw: bytes, starts: np.ndarray, ends: np.ndarray, kind: str, values: np.ndarray, ok: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Fills in the tokens the array readers did not vouch for, one by one, with read_one."""
    for index in np.flatnonzero(~ok).tolist():
        value = read_one(raw[starts[index] : ends[index]].decode("ascii"), kind)
        if value is not None:
            values[index], ok[index] = value, True
    return values, ok


def read_one(token: str, kind: str) -> float | int | bool | None:
    """One token as the strict decoder would accept it for ``kind``, or None."""
    try:
        if kind == "float":
            value = float(token)
            return value if np.isfinite(value) else None
        if kind == "bool":
            return BOOLS.get(token)
        if kind == "int" and token[-1:] in ("i", "u"):
            number = int(token[:-1])
        elif kind == "time":
            number = int(token)
        else:
            return None
    except ValueError:
        return None
    low = 0 if kind == "time" else -(2**63)
    high = MAX_TIME_NS if kind == "time" else 2**63 - 1
    return number if low <= number <= high else None


def read_tag_column(raw: bytes, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, ...]:
    """The tokens as an object array of str, and which could be read (empty ones are read as
    ""; the caller leaves them to the strict decoder). Tag values repeat a great deal, so each
    distinct value becomes one str: its bytes, zero-padded to whole 8-byte words, are its key."""
    lengths = ends - starts
    if 0 < lengths[0] <= PAD and (lengths == lengths[0]).all():
        spelt = windows(raw, int(lengths[0]))[starts]
        if (spelt == spelt[0]).all():  # one value all along (a cluster, a profile)
            column = np.empty(len(starts), object)
            column.fill(spelt[0].decode("ascii"))  # np.full is 20 times slower for objects
            return column, lengths > 0
    ok = lengths <= PAD - 8
    lengths = np.where(ok, lengths, 0)
    width = max(8, -(-int(lengths.max(initial=0)) // 8) * 8)
    matrix = byte_matrix(raw, starts, width)
    matrix *= np.arange(width) < lengths[:, None]
    words = matrix.view(np.uint64)
    key = words[:, 0].copy()
    for j in range(1, words.shape[1]):  # one word per 8 bytes: a hash, checked below
        key = key * np.uint64(0x9E3779B97F4A7C15) ^ words[:, j]
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if not (words[first][inverse] == words).all():  # two values hashed alike: sort the bytes
        _, first, inverse = np.unique(matrix.view(f"S{width}").ravel(), True, True)
    # Bytes to str for the distinct values only (numpy drops the zero padding).
    texts = matrix[first].view(f"S{width}").ravel().astype("U").astype(object)
    return texts[inverse], ok


def read_strings(raw: bytes, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, ...]:
    """The tokens read as a string field: ``"..."`` (the quotes of a line without backslash
    have been paired by the caller, so what they hold is the value as it stands)."""
    data = np.frombuffer(raw, np.uint8)
    quoted = (ends - starts >= 2) & (data[starts] == ord('"')) & (data[ends - 1] == ord('"'))
    inner_starts = np.where(quoted, starts + 1, starts)
    values, ok = read_tag_column(raw, inner_starts, np.where(quoted, ends - 1, inner_starts))
    return values, ok & quoted
