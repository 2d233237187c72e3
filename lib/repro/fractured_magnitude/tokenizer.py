"""The decoder's word-level vocabulary (the repo's ``tokenizer.py``: individual digit tokens, answers "07")."""
from __future__ import annotations

from dataclasses import dataclass

TOKENS = ("a", "b", "c", *"0123456789", "<NUM>", "<EQ>", "<SEP>", "T", "F", "<IMG>")


@dataclass(frozen=True)
class Vocab:
    """Token <-> id. Letters first (their ids 0, 1, 2 equal the letter codes of ``boards.count_strings``)."""

    tokens: tuple[str, ...] = TOKENS

    def __len__(self) -> int:
        return len(self.tokens)

    def id(self, token: str) -> int:
        return self.tokens.index(token)

    def ids(self, tokens: list[str]) -> list[int]:
        return [self.id(t) for t in tokens]

    def decode(self, ids) -> list[str]:
        return [self.tokens[int(i)] for i in ids]

    @staticmethod
    def encode_count(n: int) -> list[str]:
        """A count as two digit tokens, ``07`` -> ['0', '7'] (0..99)."""
        if not 0 <= n <= 99:
            raise ValueError(f"counts are two digits: 0..99, got {n}")
        return list(f"{n:02d}")

    def count_ids(self, n: int) -> list[int]:
        return self.ids(self.encode_count(n))

    @property
    def digit_ids(self) -> list[int]:
        return [self.id(str(d)) for d in range(10)]


VOCAB = Vocab()
