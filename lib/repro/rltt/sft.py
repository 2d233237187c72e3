"""Supervised warm-up with Ouro's entropy-regularised all-loop objective, cached by config.

Ouro's stage-1 loss trains every loop's readout and the exit gate together (card, "SFT"):

    L = Σ_t p_t · CE^(t) − c_H · H(p),       H(p) = −Σ_t p_t log p_t,

per completion token, averaged over completion tokens, with p the exit distribution at the position that
makes the prediction (not detached: the gate learns to put mass on loops whose readout is good).
Without it the intermediate readouts P^(t), t < T, are never trained and RLTT would credit noise
(card, "Pitfalls").

The checkpoint goes to ``data/cache/rltt/sft-<hash>.pt``; the hash covers every config field that
shapes the SFT and the source of this module, ``model`` and ``tasks``, so a code change retrains.
"""
from __future__ import annotations

import hashlib
import inspect
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from repro.common.paths import cache_dir

from . import model as _model_mod
from . import tasks as _tasks_mod
from .model import LoopOutput, LoopedLM, build_model
from .tasks import TOK, sft_batch

SFT_FIELDS = ("t_max", "d_model", "layers_per_loop", "sft_steps", "sft_batch", "sft_lr", "sft_ent_coef",
              "pad_slots", "trace_stride", "max_new_tokens", "seed", "teacher_error")


def ouro_sft_loss(out: LoopOutput, targets: torch.Tensor, mask: torch.Tensor, ent_coef: float = 0.05
                  ) -> tuple[torch.Tensor, dict[str, float]]:
    """Σ_t p_t CE^(t) − ent_coef · H(p), token mean over ``mask``; also each loop's plain CE."""
    logp = torch.log_softmax(out.per_loop_logits, -1)                         # [T, B, L, V]
    ce = -logp.gather(-1, targets.expand(logp.shape[0], *targets.shape).unsqueeze(-1)).squeeze(-1)
    p = out.exit_pdf.permute(2, 0, 1)                                          # [T, B, L]
    ent = -(p * torch.log(p.clamp_min(1e-12))).sum(0)
    per_tok = (p * ce).sum(0) - ent_coef * ent
    m = mask.float()
    n = m.sum().clamp_min(1)
    loss = (per_tok * m).sum() / n
    with torch.no_grad():
        info = {f"ce_loop{t + 1}": float((ce[t] * m).sum() / n) for t in range(ce.shape[0])}
        info["exit_entropy"] = float((ent * m).sum() / n)
    return loss, info


def train_sft(model: LoopedLM, cfg, log_every: int = 10) -> dict[str, Any]:
    """``cfg.sft_steps`` AdamW steps (one-cycle to ``cfg.sft_lr``, grad-clip 1) on the 70/30 task mix, task A
    written by the imperfect teacher of ``cfg.teacher_error`` (:func:`repro.rltt.tasks.chain_batch`)."""
    rng = np.random.default_rng([cfg.seed, 12, 0x5F7])
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.sft_lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.sft_lr, total_steps=cfg.sft_steps)
    history: dict[str, list] = {"step": [], "loss": []}
    t0 = time.perf_counter()
    model.train()
    for step in range(cfg.sft_steps):
        x, y, m = (torch.from_numpy(a) for a in sft_batch(rng, cfg.sft_batch, cfg.pad_slots,
                                                                          stride=cfg.trace_stride,
                                                                          teacher_error=cfg.teacher_error))
        loss, info = ouro_sft_loss(model(x), y, m, cfg.sft_ent_coef)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % log_every == 0 or step == cfg.sft_steps - 1:
            history["step"].append(step + 1)
            history["loss"].append(float(loss.detach()))
            for k, v in info.items():
                history.setdefault(k, []).append(v)
    model.eval()
    history["seconds"] = time.perf_counter() - t0
    return history


def sft_key(cfg) -> str:
    """Hash of the SFT-relevant config fields and of the code that defines the model, data and loss."""
    h = hashlib.sha256()
    h.update(repr({f: getattr(cfg, f) for f in SFT_FIELDS}).encode())
    for mod in (_model_mod, _tasks_mod):
        h.update(inspect.getsource(mod).encode())
    h.update(inspect.getsource(ouro_sft_loss).encode())
    h.update(inspect.getsource(train_sft).encode())
    h.update(torch.__version__.encode())
    return h.hexdigest()[:16]


def sft_path(cfg) -> Path:
    return cache_dir(cfg.slug) / f"sft-{sft_key(cfg)}.pt"


def load_or_train_sft(cfg) -> tuple[LoopedLM, dict[str, Any]]:
    """The SFT model of ``cfg``: from the cache when ``cfg.use_cached_sft`` and present, else trained
    (and, with ``use_cached_sft``, saved). ``info["source"]`` says which."""
    path = sft_path(cfg)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg, TOK.vocab_size)
    if cfg.use_cached_sft and path.exists():
        blob = torch.load(path, weights_only=True)
        model.load_state_dict(blob["state"])
        model.eval()
        return model, {**blob["history"], "source": f"cache ({path.name})"}
    history = train_sft(model, cfg)
    if cfg.use_cached_sft:
        tmp = path.with_suffix(".tmp")
        torch.save({"state": model.state_dict(), "history": history}, tmp)
        tmp.replace(path)
    return model, {**history, "source": "trained in this run"}


#: The card's window for the SFT checkpoint's hard greedy accuracy: enough reward variance for GRPO's groups.
SFT_WINDOW = (0.25, 0.75)


def check_sft(cfg, info: dict[str, Any], hard_greedy: float) -> dict[str, bool]:
    """The SFT checkpoint ran to the end of its schedule and its hard greedy accuracy lies in the card's
    25–75 % window. Raises ``AssertionError`` outside the smoke profile (whose 60-step SFT is not meant to
    learn the task); returns both checks."""
    ran = bool(info.get("step") and info["step"][-1] == cfg.sft_steps)
    inside = SFT_WINDOW[0] <= hard_greedy <= SFT_WINDOW[1]
    if cfg.profile != "smoke":
        assert ran, f"SFT stopped at step {info.get('step', [None])[-1]} of its {cfg.sft_steps}-step schedule"
        assert inside, (f"SFT hard greedy accuracy {hard_greedy:.3f} is outside the card's window "
                        f"{SFT_WINDOW}: move sft_steps (the card: by ±100) until it lies inside")
    return {"ran to the end of its schedule": ran, "inside the card's 25-75 % window": inside}
