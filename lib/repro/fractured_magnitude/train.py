"""Training of the chapter's models, each cached under ``data/cache/fractured_magnitude/`` by a hash of the
fields that shape it and of this package's source (a fresh clone trains them; nothing is downloaded).

1. :func:`pretrain_text` — the decoder learns NUM and EQ on strings (counts 0..text_boundary), alternating
   batches, AdamW at the repo's 2e-3 with 100 warm-up steps, *to a criterion*: held-out text NUM and EQ
   accuracy >= ``text_target`` (checked every 100 steps), capped at ``text_steps``. Trained once (seed 0) and
   shared by every fine-tuning seed, like the paper's single LM.
2. :func:`finetune_multimodal` — per seed: a fresh vision encoder and projector; each step is one image batch
   (NUM or EQ, alternating, boards 0..``max_board``) plus one text batch (0..text_boundary), parameter groups
   vision / projector / decoder at ``lr_vision`` / ``lr_projector`` / ``lr_decoder`` (the decoder nearly frozen),
   50 warm-up steps then constant, *to a criterion* like the text stage: held-out image NUM exact-count accuracy
   on boards 0..``max_board`` >= ``mm_target`` (checked every 100 steps), capped at ``mm_steps``. A model that
   reaches the cap without the criterion is kept and reported (control K5 fails), never dropped or re-seeded.
3. :func:`train_unified` — the C6 control: decoder frozen, only the vision side and the per-patch head train,
   on the same image NUM batches (``control_tasks="num"``; with the EQ batches interleaved its head collapsed onto
   one letter for every patch in two of three pilot seeds), each attempt to a validation criterion on held-out ID
   boards (count and letter purity), with fresh restarts until one meets it.
"""
from __future__ import annotations

import copy
import hashlib
import inspect
import json
import os
from pathlib import Path

import numpy as np
import torch
from torch import nn

from repro.common.paths import cache_dir

from .metrics import answer_equal, generate_count
from . import model as _model
from .model import Decoder, TinyVLM, UnifiedSpaceVLM, build_decoder, build_vit
from .tasks import Batch, num_batch, random_eq_batch

TEXT_SEED = 0
WARMUP = 100
_SOURCES = ("boards.py", "tokenizer.py", "tasks.py")


def batch_loss(model, batch: Batch) -> torch.Tensor:
    """Cross-entropy of the supervised answer tokens (two digits for NUM, T/F for EQ)."""
    if batch.patches is None:
        logits, _ = getattr(model, "decoder", model)(batch.ids)
    else:
        logits, _ = model(batch.ids, batch.patches)
    out = logits[:, batch.tgt_pos]                                   # [B, k, V]
    return nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), batch.targets.reshape(-1))


_CODE = {"text": ("batch_loss", "text_eval_sets", "text_accuracy", "pretrain_text", "Decoder", "_stack"),
         "vlm": ("batch_loss", "warmup_constant", "_image_batch", "_text_batch", "lr_groups", "image_heldout",
                 "finetune_multimodal", "Decoder", "_stack", "PatchViT", "TinyVLM"),
         "unified": ("batch_loss", "warmup_constant", "_image_batch", "image_heldout", "control_validation",
                     "train_unified", "Decoder", "_stack", "PatchViT", "TinyVLM", "UnifiedSpaceVLM")}


def _key(name: str, fields: dict) -> str:
    """Hash of the fields, of the data/model modules and of the training functions of this model (so that a change
    to how one model trains does not invalidate the others)."""
    h = hashlib.sha256(json.dumps({"name": name, **fields}, sort_keys=True).encode())
    here = Path(__file__).parent
    for f in _SOURCES:
        h.update((here / f).read_bytes())
    for fn in _CODE[name]:
        h.update(inspect.getsource(globals().get(fn) or getattr(_model, fn)).encode())
    return h.hexdigest()[:16]


def _cached(cfg, name: str, fields: dict, train_fn):
    """``train_fn() -> (model, info)``, or both from ``data/cache/<slug>/<name>-<hash>.pt``; atomic writes."""
    path = cache_dir(cfg.slug) / f"{name}-{_key(name, fields)}.pt"
    if cfg.use_cache and path.exists():
        blob = torch.load(path, weights_only=False)
        return blob["model"], {**blob["info"], "source": f"cache ({path.name})"}
    model, info = train_fn()
    if cfg.use_cache:
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        torch.save({"model": model, "info": info}, tmp)
        os.replace(tmp, path)
    return model, {**info, "source": "trained in this run"}


def _text_fields(cfg) -> dict:
    return {k: getattr(cfg, k) for k in ("board_size", "text_boundary", "d_model", "batch_size", "text_steps",
                                         "text_target", "text_lr")}


def text_eval_sets(cfg, n: int = 240, seed: int = 12345) -> tuple[Batch, Batch]:
    """Held-out text NUM and EQ batches (counts 0..text_boundary) for the stopping criterion."""
    rng = np.random.default_rng(seed)
    num = num_batch(rng.integers(0, cfg.text_boundary + 1, n), "text", rng, cfg.board_size)
    eq = random_eq_batch(0, cfg.text_boundary, n, "text", rng, cfg.board_size)
    return num, eq


def text_accuracy(model, num: Batch, eq: Batch) -> tuple[float, float]:
    """(text NUM exact accuracy, text EQ accuracy) of a decoder or a VLM's decoder."""
    pred, _ = generate_count(model, num)
    said = answer_equal(model, eq)
    return float((pred == num.n).mean()), float((said == (eq.n == eq.n_text)).mean())


def pretrain_text(cfg) -> tuple[Decoder, dict]:
    """The shared text decoder (cached). ``info``: steps run, the criterion's history, final accuracies."""
    def train():
        rng = np.random.default_rng(TEXT_SEED)
        dec = build_decoder(cfg.d_model, TEXT_SEED)
        opt = torch.optim.AdamW(dec.parameters(), lr=cfg.text_lr)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / WARMUP))
        num_ev, eq_ev = text_eval_sets(cfg)
        hist = {"step": [], "num": [], "eq": [], "loss": []}
        losses, step = [], 0
        for step in range(1, cfg.text_steps + 1):
            dec.train()
            if step % 2:
                b = num_batch(rng.integers(0, cfg.text_boundary + 1, cfg.batch_size), "text", rng, cfg.board_size)
            else:
                b = random_eq_batch(0, cfg.text_boundary, cfg.batch_size, "text", rng, cfg.board_size)
            loss = batch_loss(dec, b)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(dec.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
            if step % 100 == 0 or step == cfg.text_steps:
                a_num, a_eq = text_accuracy(dec, num_ev, eq_ev)
                hist["step"].append(step), hist["num"].append(a_num), hist["eq"].append(a_eq)
                hist["loss"].append(float(np.mean(losses[-100:])))
                if a_num >= cfg.text_target and a_eq >= cfg.text_target:
                    break
        return dec, {"steps": step, "history": hist, "text_num": hist["num"][-1], "text_eq": hist["eq"][-1],
                     "criterion_met": bool(hist["num"][-1] >= cfg.text_target and hist["eq"][-1] >= cfg.text_target)}
    return _cached(cfg, "text", _text_fields(cfg), train)


def _image_batch(step: int, cfg, max_board: int, rng: np.random.Generator) -> Batch:
    """Image batch of a fine-tuning step: NUM on odd steps, EQ on even ones; counts uniform in 0..max_board;
    EQ pairs have both counts in 0..max_board (the negatives' too: no boundary shortcut)."""
    if step % 2:
        return num_batch(rng.integers(0, max_board + 1, cfg.batch_size), "image", rng, cfg.board_size,
                         cfg.distractor_range)
    return random_eq_batch(0, max_board, cfg.batch_size, "image", rng, cfg.board_size, cfg.distractor_range)


def _text_batch(step: int, cfg, rng: np.random.Generator) -> Batch:
    if step % 2:
        return num_batch(rng.integers(0, cfg.text_boundary + 1, cfg.batch_size), "text", rng, cfg.board_size)
    return random_eq_batch(0, cfg.text_boundary, cfg.batch_size, "text", rng, cfg.board_size)


def lr_groups(model: TinyVLM, cfg) -> list[dict]:
    """The three parameter groups of the fine-tuning (vision, projector, decoder)."""
    return [{"params": list(model.vit.parameters()), "lr": cfg.lr_vision, "name": "vision"},
            {"params": list(model.proj.parameters()), "lr": cfg.lr_projector, "name": "projector"},
            {"params": list(model.decoder.parameters()), "lr": cfg.lr_decoder, "name": "decoder"}]


def _mm_fields(cfg, seed: int, max_board: int) -> dict:
    return {**_text_fields(cfg), "seed": seed, "max_board": max_board,
            **{k: getattr(cfg, k) for k in ("distractor_range", "mm_steps", "mm_target", "lr_vision", "lr_projector",
                                            "lr_decoder")}}


CHECK_EVERY = 100      # steps between two checks of a training criterion (text and image stages)
MM_WARMUP = 50


def warmup_constant(opt: torch.optim.Optimizer, warmup: int = MM_WARMUP):
    """Linear warm-up over ``warmup`` steps, then the peak lr (the run stops at a criterion, not a fixed step)."""
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))


def image_heldout(cfg, max_board: int, per_count: int = 20, seed: int = 54321) -> Batch:
    """Held-out image NUM boards for the fine-tuning criterion: ``per_count`` boards per count 0..max_board, drawn
    from their own generator (not the training stream, not the chapter's evaluation sets)."""
    rng = np.random.default_rng([seed, max_board])
    return num_batch(np.repeat(np.arange(max_board + 1), per_count), "image", rng, cfg.board_size,
                     cfg.distractor_range)


def finetune_multimodal(cfg, text_decoder: Decoder, seed: int, max_board: int | None = None) -> tuple[TinyVLM, dict]:
    """The VLM of one seed (cached): boards 0..``max_board`` (default: the vision boundary), trained until its
    held-out exact count on 0..``max_board`` reaches ``mm_target`` or ``mm_steps`` steps have run. ``info``: steps
    run, whether the criterion was met, the held-out accuracy history, the training loss."""
    max_board = cfg.vision_boundary if max_board is None else max_board

    def train():
        rng = np.random.default_rng(seed)
        vit = build_vit(cfg.d_model, cfg.n_cells, 25, seed)
        model = TinyVLM(vit, copy.deepcopy(text_decoder))
        torch.manual_seed(seed)
        nn.init.xavier_uniform_(model.proj.weight), nn.init.zeros_(model.proj.bias)
        opt = torch.optim.AdamW(lr_groups(model, cfg))
        sched = warmup_constant(opt)
        held = image_heldout(cfg, max_board)
        hist = {"step": [], "acc": []}
        losses, step = [], 0
        for step in range(1, cfg.mm_steps + 1):
            model.train()
            loss = batch_loss(model, _image_batch(step, cfg, max_board, rng)) + batch_loss(model, _text_batch(step, cfg, rng))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
            if step % CHECK_EVERY == 0 or step == cfg.mm_steps:
                pred, _ = generate_count(model, held)
                hist["step"].append(step), hist["acc"].append(float((pred == held.n).mean()))
                if hist["acc"][-1] >= cfg.mm_target:
                    break
        return model, {"loss": losses, "steps": step, "history": hist, "heldout_acc": hist["acc"][-1],
                       "criterion_met": bool(hist["acc"][-1] >= cfg.mm_target)}
    return _cached(cfg, "vlm", _mm_fields(cfg, seed, max_board), train)


CONTROL_CHECK_EVERY = 50   # steps between two checks of the control's validation criterion
PURITY_TARGET = 0.9        # criterion: mean max letter probability of the patch head on the validation boards


@torch.no_grad()
def control_validation(model: UnifiedSpaceVLM, held: Batch) -> tuple[float, float]:
    """The unified control's validation numbers on held-out ID boards (``image_heldout``; never the evaluation
    sets, never a per-patch label): exact-count accuracy, and *letter purity*, the mean over patches of the head's
    largest letter probability (1 when every patch is read as one letter, 1/3 for a uniform mixture)."""
    pred, _ = generate_count(model, held)
    model.eval()
    purity = float(model.patch_probs(held.patches).max(-1).values.mean())
    return float((pred == held.n).mean()), purity


def train_unified(cfg, text_decoder: Decoder, seed: int) -> tuple[UnifiedSpaceVLM, dict]:
    """The unified-space control of one seed (cached): decoder frozen, image NUM batches (boards 0..vision_boundary).

    Learning a per-patch head through a frozen counter is learning from label proportions: every board's gradient
    first says "more c" or "fewer c" on all its patches. The vision encoder attends over the whole board, so it
    can also carry the board's count into every token and let the head emit the same letter *mixture* on every
    patch, at the level the frozen decoder reads as n (measured on the model seed 1001 of a pilot: head 'c' rate
    30 % on black and on other patches alike, held-out count 42 % after 300 steps). That shortcut never reads the
    image as a string of letters. So each attempt trains (50 warm-up steps, then constant lr) until a *validation
    criterion* on held-out ID boards (``control_validation``: exact count >= ``mm_target`` and letter purity >=
    ``PURITY_TARGET``; counts only, no patch labels, no VX/FX board) is met, checked every ``CONTROL_CHECK_EVERY``
    steps and capped at ``control_steps``; up to ``control_restarts`` fresh inits are tried and the first that meets
    it is kept (else the one with the best validation count, and the ledger's K4 judges it)."""
    held = image_heldout(cfg, cfg.vision_boundary)

    def attempt(k: int):
        rng = np.random.default_rng([seed, k])
        model = UnifiedSpaceVLM(build_vit(cfg.d_model, cfg.n_cells, 25, 7919 * k + seed), copy.deepcopy(text_decoder))
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=cfg.control_lr)
        sched = warmup_constant(opt)
        losses, hist = [], {"step": [], "acc": [], "purity": []}
        for step in range(1, cfg.control_steps + 1):
            model.train()
            task_step = step if cfg.control_tasks == "num+eq" else 1          # odd step = a NUM batch
            loss = batch_loss(model, _image_batch(task_step, cfg, cfg.vision_boundary, rng))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
            if step % CONTROL_CHECK_EVERY == 0 or step == cfg.control_steps:
                acc, pur = control_validation(model, held)
                hist["step"].append(step), hist["acc"].append(acc), hist["purity"].append(pur)
                if acc >= cfg.mm_target and pur >= PURITY_TARGET:
                    break
        return model, losses, hist

    def train():
        best, tried = None, []
        for k in range(cfg.control_restarts):
            model, losses, hist = attempt(k)
            met = hist["acc"][-1] >= cfg.mm_target and hist["purity"][-1] >= PURITY_TARGET
            tried.append({"steps": hist["step"][-1], "val_acc": hist["acc"][-1], "purity": hist["purity"][-1],
                          "criterion_met": bool(met)})
            if best is None or hist["acc"][-1] > best[2]["acc"][-1] or met:
                best = (model, losses, hist, k)
            if met:
                break
        return best[0], {"loss": best[1], "history": best[2], "attempt_kept": best[3], "attempts": tried,
                         "criterion_met": tried[best[3]]["criterion_met"]}
    return _cached(cfg, "unified", {**_text_fields(cfg), "seed": seed, "max_board": cfg.vision_boundary,
                                    "distractor_range": cfg.distractor_range, "control_steps": cfg.control_steps,
                                    "control_lr": cfg.control_lr, "control_tasks": cfg.control_tasks,
                                    "control_restarts": cfg.control_restarts, "mm_target": cfg.mm_target},
                   train)
