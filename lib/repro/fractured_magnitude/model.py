"""The tiny vision-language model of the paper (authors' ``model.py``), at book scale.

* :class:`PatchViT` — linear patch embedding (one patch = one board cell) + learned positions + pre-norm
  transformer encoder: the *vision tokens* the individuation and magnitude probes read.
* :class:`Decoder` — a causal pre-norm transformer over the word-level vocabulary with learned 1-D positions.
  Image tokens sit at the *same* positions as the characters of a string (positions 1..36), so the two
  modalities differ only in token content (our decision; stricter than the repo's separate M-RoPE positions).
* :class:`TinyVLM` — ``vit → linear projector → decoder``.
* :class:`UnifiedSpaceVLM` — the control of claim C6: a per-patch 3-way head whose softmax mixes the decoder's
  own frozen embeddings of 'c', 'b', 'a', so an image enters the decoder *in its text space*.
"""
from __future__ import annotations

import torch
from torch import nn

from .tokenizer import VOCAB

MAX_LEN = 76  # <EQ> 36 <SEP> 36 <SEP> + answer


def _stack(d: int, n_layers: int, n_heads: int) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(d, n_heads, dim_feedforward=2 * d, dropout=0.0, activation="gelu",
                                       batch_first=True, norm_first=True)
    return nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)


class PatchViT(nn.Module):
    """Vision encoder: patches ``[B, P, patch_dim]`` -> tokens ``[B, P, d]`` (final LayerNorm applied)."""

    def __init__(self, d: int, n_patches: int, patch_dim: int, n_layers: int = 2, n_heads: int = 2) -> None:
        super().__init__()
        self.embed = nn.Linear(patch_dim, d)
        self.pos = nn.Parameter(torch.randn(n_patches, d) * 0.02)
        self.blocks = _stack(d, n_layers, n_heads)
        self.norm = nn.LayerNorm(d)

    def forward(self, patches: torch.Tensor) -> torch.Tensor:
        return self.norm(self.blocks(self.embed(patches) + self.pos))


class Decoder(nn.Module):
    """Causal decoder; ``forward(ids, img=None)`` returns (logits ``[B, T, V]``, final-norm states ``[B, T, d]``).
    ``img`` ``[B, P, d]`` replaces the embeddings of positions 1..P (the ``<IMG>`` placeholders)."""

    def __init__(self, d: int, vocab_size: int = len(VOCAB), n_layers: int = 2, n_heads: int = 2,
                 max_len: int = MAX_LEN) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d)
        self.pos = nn.Parameter(torch.randn(max_len, d) * 0.02)
        self.blocks = _stack(d, n_layers, n_heads)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab_size)
        nn.init.normal_(self.tok.weight, std=0.5)

    def forward(self, ids: torch.Tensor, img: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.tok(ids)
        if img is not None:
            x = torch.cat([x[:, :1], img, x[:, 1 + img.shape[1]:]], dim=1)
        T = ids.shape[1]
        x = x + self.pos[:T]
        mask = nn.Transformer.generate_square_subsequent_mask(T, dtype=x.dtype)
        h = self.norm(self.blocks(x, mask=mask, is_causal=True))
        return self.head(h), h


class TinyVLM(nn.Module):
    """``vit`` → ``proj`` (linear) → ``decoder``; ``image_tokens(patches)`` are what the decoder receives."""

    def __init__(self, vit: PatchViT, decoder: Decoder) -> None:
        super().__init__()
        d = decoder.tok.embedding_dim
        self.vit, self.proj, self.decoder = vit, nn.Linear(vit.embed.out_features, d), decoder

    def vision_tokens(self, patches: torch.Tensor) -> torch.Tensor:
        return self.vit(patches)

    def image_tokens(self, patches: torch.Tensor) -> torch.Tensor:
        return self.proj(self.vit(patches))

    def forward(self, ids: torch.Tensor, patches: torch.Tensor | None = None):
        return self.decoder(ids, None if patches is None else self.image_tokens(patches))


class UnifiedSpaceVLM(TinyVLM):
    """The C6 control: per-patch head → softmax over ('c', 'b', 'a') → mixture of the decoder's frozen letter
    embeddings. Only the vision side (``vit`` and ``patch_head``) trains."""

    LETTERS = ("c", "b", "a")

    def __init__(self, vit: PatchViT, decoder: Decoder) -> None:
        super().__init__(vit, decoder)
        del self.proj
        self.patch_head = nn.Linear(vit.embed.out_features, 3)
        for p in self.decoder.parameters():
            p.requires_grad_(False)
        self.register_buffer("letter_ids", torch.tensor(VOCAB.ids(list(self.LETTERS))))

    def patch_probs(self, patches: torch.Tensor) -> torch.Tensor:
        """``[B, P, 3]`` softmax over ('c', 'b', 'a') per patch."""
        return torch.softmax(self.patch_head(self.vit(patches)), dim=-1)

    def image_tokens(self, patches: torch.Tensor) -> torch.Tensor:
        return self.patch_probs(patches) @ self.decoder.tok.weight[self.letter_ids]


def build_decoder(d: int, seed: int) -> Decoder:
    torch.manual_seed(seed)
    return Decoder(d)


def build_vit(d: int, n_patches: int, patch_dim: int, seed: int) -> PatchViT:
    torch.manual_seed(seed)
    return PatchViT(d, n_patches, patch_dim)


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
