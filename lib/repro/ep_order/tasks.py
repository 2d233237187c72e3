"""The instruction set of chapter 17: seven synthetic domains of different reasoning depth, in English templates.

The paper fine-tunes LLMs on large mixed instruction-tuning sets; here every sample is one line of a compact format
``"I:<instruction>\\nX:<input>\\nR:<response>\\n"`` (at most :data:`MAX_LEN` characters), so that a character-level
model sees real wording in the instruction and a task of known difficulty in the response. The seven domains go
from pure copying to a mod-10 chain with a written trace and a bracket-depth trace (card, *Setting at book scale*);
each has three instruction templates. The generator is seeded pure Python (``random.Random``): the same seed gives
the same data on every machine.
"""
from __future__ import annotations

import random
from typing import Callable

#: Domains in book order: name -> three English instruction templates.
TEMPLATES: dict[str, tuple[str, str, str]] = {
    "copy": ("copy the letters", "repeat this word", "write it again"),
    "reverse": ("reverse the letters", "write it backwards", "spell it in reverse"),
    "sort": ("sort the digits", "order digits low to high", "put the digits in order"),
    "count": ("count the letter", "how many times does it occur", "tally that letter"),
    "add": ("add the numbers", "sum these two", "what is the total"),
    "chain": ("compute mod 10 step by step", "evaluate left to right mod 10", "chain the ops mod 10"),
    "brackets": ("are the brackets balanced", "check the bracket depth", "trace depth then say yes or no"),
}
DOMAINS: tuple[str, ...] = tuple(TEMPLATES)
LETTERS = "abcdefghijklmnopqrstuvwxyz"
MAX_LEN = 72
#: Character vocabulary: index 0 is padding; every character a sample can contain follows.
PAD = 0
CHARS = "\n " + LETTERS + "0123456789" + "+-*=;>:()'?IXR"
VOCAB = {c: i + 1 for i, c in enumerate(CHARS)}
VOCAB_SIZE = len(CHARS) + 1


def _letters(rng: random.Random, lo: int, hi: int) -> str:
    return "".join(rng.choice(LETTERS) for _ in range(rng.randint(lo, hi)))


def solve_chain(x: str) -> str:
    """Trace of a left-to-right mod-10 chain ``"3+4*2"`` -> ``"3+4=7;7*2=4>4"``."""
    acc, trace = int(x[0]), []
    for k in range(1, len(x), 2):
        op, b = x[k], int(x[k + 1])
        new = (acc + b) % 10 if op == "+" else (acc - b) % 10 if op == "-" else (acc * b) % 10
        trace.append(f"{acc}{op}{b}={new}")
        acc = new
    return ";".join(trace) + f">{acc}"


def solve_brackets(x: str) -> str:
    """Running depth after each bracket, then ``>yes``/``>no``; a depth below 0 is written ``-`` and ends it."""
    depth, trace = 0, ""
    for ch in x:
        depth += 1 if ch == "(" else -1
        if depth < 0:
            return trace + "->no"
        trace += str(depth)
    return trace + (">yes" if depth == 0 else ">no")


def _copy(rng):
    x = _letters(rng, 3, 7)
    return x, x


def _reverse(rng):
    x = _letters(rng, 3, 6)
    return x, x[::-1]


def _sort(rng):
    x = "".join(rng.choice("0123456789") for _ in range(rng.randint(3, 6)))
    return x, "".join(sorted(x))


def _count(rng):
    x = _letters(rng, 5, 9)
    target = x[rng.randrange(len(x))] if rng.random() < 0.8 else rng.choice(LETTERS)
    return f"{target} in {x}", str(x.count(target))


def _add(rng):
    a, b = rng.randint(10, 99), rng.randint(10, 99)
    return f"{a}+{b}", str(a + b)


def _chain(rng):
    depth = rng.randint(2, 4)
    x = str(rng.randint(0, 9)) + "".join(rng.choice("+-*") + str(rng.randint(0, 9)) for _ in range(depth))
    return x, solve_chain(x)


def _brackets(rng):
    n = rng.randint(2, 4) * 2
    if rng.random() < 0.5:  # a balanced string: a random Dyck word
        opens, s, depth = n // 2, "", 0
        for i in range(n):
            left = n - i
            if opens and (depth == 0 or rng.random() < 0.5) and depth < left:
                s, opens, depth = s + "(", opens - 1, depth + 1
            else:
                s, depth = s + ")", depth - 1
    else:
        s = "".join(rng.choice("()") for _ in range(n))
    return s, solve_brackets(s)


MAKERS: dict[str, Callable[[random.Random], tuple[str, str]]] = {
    "copy": _copy, "reverse": _reverse, "sort": _sort, "count": _count, "add": _add, "chain": _chain,
    "brackets": _brackets}


def make_sample(domain: str, rng: random.Random) -> dict:
    """One sample ``{instruction, input, response, domain, text}`` of ``domain``."""
    instr = rng.choice(TEMPLATES[domain])
    x, r = MAKERS[domain](rng)
    return {"instruction": instr, "input": x, "response": r, "domain": domain, "text": format_sample(instr, x, r)}


def format_sample(instruction: str, x: str, response: str) -> str:
    return f"I:{instruction}\nX:{x}\nR:{response}\n"


def make_dataset(n_per_domain: int, seed: int, stream: str = "train",
                 domains: tuple[str, ...] = DOMAINS) -> list[dict]:
    """``n_per_domain`` samples of every domain in ``domains``, interleaved domain by domain; ``stream`` names a
    disjoint draw (``"train"``, ``"eval"``, ``"base"`` and ``"base-boost"``: the base model's pre-training data)."""
    unknown = [d for d in domains if d not in TEMPLATES]
    if unknown:
        raise ValueError(f"domains: unknown {unknown}; known: {', '.join(DOMAINS)}")
    rng = random.Random(f"ep_order/{stream}/{seed}")
    out = []
    for _ in range(n_per_domain):
        for d in domains:
            out.append(make_sample(d, rng))
    return out


def encode(samples: list[dict]) -> tuple[list[list[int]], list[int], list[int]]:
    """Character ids of every sample, the index where its response starts (after ``R:``) and where its
    instruction ends; the response includes the closing newline (the end-of-sample token)."""
    ids, r_start, i_end = [], [], []
    for s in samples:
        text = s["text"]
        if len(text) > MAX_LEN:
            raise ValueError(f"sample longer than the context ({len(text)} > {MAX_LEN}): {text!r}")
        ids.append([VOCAB[c] for c in text])
        r_start.append(len(text) - len(s["response"]) - 1)
        i_end.append(2 + len(s["instruction"]))
    return ids, r_start, i_end
