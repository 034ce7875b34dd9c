"""Deterministic hashing and a tiny seeded generator (splitmix64) for the demo site.

Everything the demo site shows derives from ``(seed, purpose, index)`` through BLAKE2b, so
any question, page or image can be produced on its own, in any order, with the same bytes.
Python's global ``random`` and the salted ``hash()`` are never used.
"""

from __future__ import annotations

import hashlib

MASK64 = (1 << 64) - 1


def hash64(*parts: object) -> int:
    """A stable 64-bit integer from the textual form of ``parts``."""
    data = "\x1f".join(map(str, parts)).encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def mix64(x: int) -> int:
    """The splitmix64 finalizer: a fast, well-spread bijection of 64-bit integers."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def ihash(seed: int, tag: int, i: int, extra: int = 0) -> int:
    """A stable 64-bit hash of small integers (much faster than hash64)."""
    return mix64(mix64(mix64(seed * 1_000_003 + tag) ^ i) + extra)


def unit(*parts: object) -> float:
    """A stable float in [0, 1) from ``parts``."""
    return (hash64(*parts) >> 11) / 9007199254740992.0


class Rng:
    """splitmix64: fast, seedable from one integer, identical on every platform."""

    __slots__ = ("state",)

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK64

    def next(self) -> int:
        self.state = z = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        return self.next() % n

    def randint(self, lo: int, hi: int) -> int:
        """Uniform integer in [lo, hi], both ends included."""
        return lo + self.next() % (hi - lo + 1)

    def random(self) -> float:
        return (self.next() >> 11) / 9007199254740992.0

    def choice(self, seq):
        return seq[self.next() % len(seq)]

    def shuffle(self, items: list) -> list:
        for j in range(len(items) - 1, 0, -1):
            k = self.next() % (j + 1)
            items[j], items[k] = items[k], items[j]
        return items

    def sample(self, seq, k: int) -> list:
        pool = list(seq)
        out = []
        for _ in range(k):
            out.append(pool.pop(self.next() % len(pool)))
        return out

    def seed32(self) -> int:
        return self.next() & 0xFFFFFFFF
