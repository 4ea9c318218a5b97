"""What the fuzz tests share: hypothesis settings, a mutation strategy and a tally.

Each fuzz test feeds at least 10,000 generated inputs (``FUZZ_EXAMPLES``) through one parser.
Inputs are valid seeds (real fixture files, library scenarios, real line protocol) with random
byte-level mutations, plus free random text: mutating real input reaches the deep branches of
a parser far more often than noise does. ``derandomize`` makes a run repeatable in CI.

The :class:`Tally` counts inputs, accepted records and rejections by reason; each test prints it
(``pytest -s``) and asserts that every input was either accepted or rejected with a reason.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FUZZ_EXAMPLES = 10_000
FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
# Characters that mean something to one of the parsers: separators, escapes, quotes, digits,
# signs, line breaks, a NUL, non-ASCII digits and a character outside the BMP.
SPECIAL = ' ,=\\"\n\r\t:;[]{}#.-+0123456789eEinf/\x00\u0663\u00b2\U0001f600'


def mutate(rng: random.Random, seeds: Sequence[str], max_edits: int = 6) -> str:
    """One seed with a few random insertions, deletions, replacements, repeats and cuts."""
    text = rng.choice(seeds)
    for _ in range(rng.randint(0, max_edits)):
        position = rng.randint(0, len(text))
        char = rng.choice(SPECIAL) if rng.random() < 0.8 else chr(rng.randint(1, 0x10FFFF))
        if 0xD800 <= ord(char) <= 0xDFFF:
            char = "?"  # a lone surrogate cannot be written to a file
        operation = rng.randint(0, 4)
        if operation == 0:
            text = text[:position] + char + text[position:]
        elif operation == 1:
            text = text[:position] + text[position + 1 :]
        elif operation == 2:
            text = text[:position] + char + text[position + 1 :]
        elif operation == 3:
            text = text[:position]
        else:
            text = text[:position] + char * rng.randint(2, 50) + text[position:]
    return text


def fuzz_input(rng: random.Random, seeds: Sequence[str]) -> str:
    """Mostly a mutated seed, sometimes free text from the special alphabet."""
    if rng.random() < 0.85:
        return mutate(rng, seeds)
    return "".join(rng.choice(SPECIAL) for _ in range(rng.randint(0, 80)))


# Hypothesis draws only a seed; the input is built from it with plain ``random``. That keeps
# hypothesis's per-example cost small enough for 10,000 examples per parser on two cores, and
# a failing example is still reported (and replayed) by its seed.
SEEDS = st.integers(min_value=0, max_value=2**64 - 1)


@dataclass
class Tally:
    """Inputs seen, records accepted, and rejections counted by reason."""

    name: str
    inputs: int = 0
    accepted: int = 0
    rejected: Counter[str] = field(default_factory=Counter)

    def reject(self, reason: str) -> None:
        assert reason.strip(), "a rejection must carry a reason"
        self.rejected[reason] += 1

    def summary(self) -> str:
        top = ", ".join(f"{reason!r}: {n}" for reason, n in self.rejected.most_common(5))
        return (
            f"fuzz {self.name}: {self.inputs} inputs, {self.accepted} accepted, "
            f"{sum(self.rejected.values())} rejected with {len(self.rejected)} distinct reasons "
            f"(top: {top})"
        )

    def check(self, minimum: int = FUZZ_EXAMPLES) -> None:
        print(self.summary())
        assert self.inputs >= minimum, self.summary()
