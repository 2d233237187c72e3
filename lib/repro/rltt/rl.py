"""GRPO and RLTT as one loss: on-policy REINFORCE, group-normalised advantages, final-loop k3 KL.

The paper's Eq. 5–7 (and the authors' ``rltt_algos.py`` / ``rltt_actor.py``, jonwill8/RLTT):

    L(θ) = −(1/G) Σ_i Â_i (1/|y_i|) Σ_j Σ_t ω_{i,j,t} log P^(t)_θ(y_{i,j} | x, y_{i,<j})  +  β · KL_T
    Â_i  = (r_i − mean_g r) / (std_g r + 1e-8)                       (unbiased std, per group of G)
    KL_T = (1/|y_i|) Σ_j [exp(ℓ_ref − ℓ^(T)) − (ℓ_ref − ℓ^(T)) − 1]   (k3 estimator, final loop only)

GRPO is the same loss with ω = e_T (one-hot on the last loop). RLTT's weightings: ``uniform`` ω_t = 1/T,
``progressive`` ω_t = t^α/Σ_s s^α, ``exit_pdf`` ω_{i,j,t} = p_t at that token (not detached, as in the
authors' code; ``exit_pdf_detached`` for the ablation), ``learned`` ω = softmax(logits/temp) with 10× lr.
No probability ratio, no clipping: one gradient step per batch of fresh rollouts.

Two decisions where the sources differ (stated in the chapter's Setting): the per-sequence 1/|y_i| of
the paper's Eq. 6 rather than the batch token-mean of the authors' verl path, and log-probabilities of
the *sampling* distribution softmax(z/τ), as the verl actor computes them (the exact on-policy score).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from .decode import completion_mask, generate
from .model import LoopedLM
from .tasks import PROMPT_LEN_A, TOK, batch_rewards, chain_batch, lucky_guesses

STRATEGIES = ("grpo", "uniform", "progressive", "exit_pdf", "exit_pdf_detached", "learned")


# ----------------------------------------------------------------------------- the loss, piece by piece

def loop_weights(strategy: str, t_max: int, alpha: float = 1.0, exit_pdf: torch.Tensor | None = None,
                 learned_logits: torch.Tensor | None = None, temp: float = 1.0) -> torch.Tensor:
    """ω over the loops: [T] for static strategies, [B, L, T] for the exit distribution."""
    if strategy == "grpo":
        w = torch.zeros(t_max)
        w[-1] = 1.0
        return w
    if strategy == "uniform":
        return torch.full((t_max,), 1.0 / t_max)
    if strategy == "progressive":
        t = torch.arange(1, t_max + 1, dtype=torch.float32) ** alpha
        return t / t.sum()
    if strategy in ("exit_pdf", "exit_pdf_detached"):
        if exit_pdf is None:
            raise ValueError(f"strategy {strategy!r} needs the model's exit_pdf")
        return exit_pdf.detach() if strategy == "exit_pdf_detached" else exit_pdf
    if strategy == "learned":
        if learned_logits is None:
            raise ValueError("strategy 'learned' needs learned_logits")
        return torch.softmax(learned_logits / temp, 0)
    raise ValueError(f"unknown loop weighting {strategy!r}; choose from {', '.join(STRATEGIES)}")


def group_advantages(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Â = (r − group mean) / (group unbiased std + 1e-8); consecutive blocks of ``group_size`` are groups."""
    r = rewards.float().view(-1, group_size)
    a = (r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-8)
    return a.view(-1)


def per_loop_token_logprobs(model: LoopedLM, ids: torch.Tensor, mask: torch.Tensor, temperature: float = 1.0,
                            last_only: bool = False, group_size: int | None = None, prompt_len: int | None = None
                            ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """One teacher-forced forward: ℓ^(t)_j = log softmax(z^(t)_{j−1}/τ)[ids_j] for every loop t.

    ``ids`` [B, L] are prompt + completion, ``mask`` [B, L] marks completion tokens. Returns
    (ℓ [B, L−1, T'], exit_pdf [B, L−1, T] or None, target mask [B, L−1]); position j−1 of the outputs
    scores token j, and the exit distribution used as ω for token j is the one at position j−1, where the
    prediction is made. ``last_only`` reads out the last loop only (GRPO's cost).

    With ``group_size`` G and ``prompt_len`` (rows in groups of G sharing one prompt, as rollouts are), the
    prompt is run once per group and its per-loop keys and values are shared by the G completions —
    the same numbers (tested), with gradients flowing into the shared prefix, at about half the cost.
    Positions inside the prompt are then returned as zeros (they are never completion targets).
    """
    readout = "last" if last_only else "all"
    if group_size is None or prompt_len is None or group_size == 1:
        out = model(ids[:, :-1], readout=readout)
        logits, exit_pdf = out.per_loop_logits, out.exit_pdf
    else:
        B, L = ids.shape
        G, Lp = group_size, prompt_len
        prompts = ids[::G, :Lp]
        if not torch.equal(prompts.repeat_interleave(G, 0), ids[:, :Lp]):
            raise ValueError("rows are not in groups of group_size sharing one prompt")
        pre = model(prompts, readout=readout, use_cache=True)
        cache = [[(k.repeat_interleave(G, 0), v.repeat_interleave(G, 0)) for k, v in layer] for layer in pre.cache]
        post = model(ids[:, Lp:-1], cache=cache, readout=readout)
        first = pre.per_loop_logits[:, :, -1:].repeat_interleave(G, 1)         # predicts the first completion token
        pad = first.new_zeros(first.shape[0], B, Lp - 1, first.shape[-1])
        logits = torch.cat([pad, first, post.per_loop_logits], 2)
        exit_pdf = None
        if not last_only:
            ep_first = pre.exit_pdf[:, -1:].repeat_interleave(G, 0)
            exit_pdf = torch.cat([ep_first.new_zeros(B, Lp - 1, ep_first.shape[-1]), ep_first, post.exit_pdf], 1)
    logp = torch.log_softmax(logits / temperature, -1)                         # [T', B, L-1, V]
    tgt = ids[:, 1:]
    lp = logp.gather(-1, tgt.expand(logp.shape[0], *tgt.shape).unsqueeze(-1)).squeeze(-1)
    if group_size is not None and prompt_len is not None and group_size > 1:
        lp = lp * (torch.arange(lp.shape[-1]) >= prompt_len - 1)                # zeros inside the prompt
    return lp.permute(1, 2, 0), exit_pdf, mask[:, 1:]


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(π_θ‖π_ref): exp(ℓ_ref − ℓ) − (ℓ_ref − ℓ) − 1 (≥ 0, = 0 iff equal)."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def rltt_loss(per_loop_lp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, weights: torch.Tensor,
              ref_lp: torch.Tensor | None = None, beta: float = 0.0) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss of Eq. 5–7 for ℓ [B, L, T], Â [B], mask [B, L], ω [T] or [B, L, T], ref ℓ [B, L].

    The policy-gradient term is −mean_i Â_i (1/|y_i|) Σ_j Σ_t ω ℓ (the mean over all B rollouts is the
    mean over groups of (1/G) Σ_i); the KL term uses the last loop ``per_loop_lp[..., -1]`` only.
    """
    m = mask.float()
    n_tok = m.sum(1).clamp_min(1)
    w = weights if weights.dim() == 3 else weights.view(1, 1, -1)
    seq_lp = ((per_loop_lp * w).sum(-1) * m).sum(1) / n_tok                    # (1/|y|) Σ_j Σ_t ω ℓ
    pg = -(adv * seq_lp).mean()
    info = {"pg": float(pg.detach())}
    loss = pg
    if ref_lp is not None:
        kl = ((k3_kl(per_loop_lp[..., -1], ref_lp) * m).sum(1) / n_tok).mean()
        loss = loss + beta * kl
        info["kl"] = float(kl.detach())
    return loss, info


# ----------------------------------------------------------------------------- rollouts

def sample_rollouts(model: LoopedLM, prompts: torch.Tensor, group_size: int, temperature: float, max_new: int,
                    generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """G completions per prompt from P^(T) at temperature τ, all in one batch with the KV cache.

    Returns ids [P·G, Lp + max_new] (prompt + completion, rows grouped by prompt), the completion mask
    (tokens up to the first ``<eos>``) and the completions [P·G, max_new].
    """
    rep = prompts.repeat_interleave(group_size, 0)
    comp = generate(model, prompts, max_new, temperature=temperature, generator=generator, repeats=group_size)
    ids, mask = join_completions(rep, comp)
    return ids, mask, comp


def join_completions(prompts: torch.Tensor, comp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompt + completion ids and the completion mask, cut after the longest completion (pure padding
    beyond it changes no log-probability, only the cost of the forward)."""
    cmask = completion_mask(comp)
    used = int(cmask.any(0).nonzero().max()) + 1 if bool(cmask.any()) else 1
    ids = torch.cat([prompts, comp[:, :used]], 1)
    mask = torch.cat([torch.zeros_like(prompts, dtype=torch.bool), cmask[:, :used]], 1)
    return ids, mask


# ----------------------------------------------------------------------------- training

@dataclass
class RLRun:
    """One method's model, optimiser and per-step log."""

    method: str
    model: LoopedLM
    opt: torch.optim.Optimizer
    learned_logits: torch.Tensor | None = None
    log: dict[str, list] = field(default_factory=dict)

    def append(self, **kv) -> None:
        for k, v in kv.items():
            self.log.setdefault(k, []).append(v)


def clone_model(model: LoopedLM) -> LoopedLM:
    new = LoopedLM(model.vocab, model.tok.weight.shape[1], model.blocks[0].n_heads, len(model.blocks),
                   model.t_max, model.max_len, model.blocks[0].w_out.in_features)
    new.load_state_dict(model.state_dict())
    return new


def rl_prompts(rng: np.random.Generator, n: int, pad_slots: str, depths: Sequence[int] = (4, 5, 6)
               ) -> tuple[torch.Tensor, np.ndarray]:
    """``n`` task-A prompts with depths uniform in ``depths`` and their answers."""
    p, _, a = chain_batch(rng, rng.choice(np.asarray(depths), size=n), pad_slots)
    return torch.from_numpy(p), a


def rl_step(run: RLRun, ref: LoopedLM, prompts: torch.Tensor, answers: np.ndarray, cfg,
            generator: torch.Generator) -> None:
    """Rollouts, rewards, advantages, one forward, one Adam step; logs times, reward, KL and ω."""
    t0 = time.perf_counter()
    model = run.model
    model.eval()
    ids, mask, comp = sample_rollouts(model, prompts, cfg.group_size, cfg.temperature, cfg.max_new_tokens, generator)
    rewards = torch.from_numpy(batch_rewards(comp.numpy(), np.repeat(answers, cfg.group_size)))
    lucky = lucky_guesses(comp.numpy(), prompts.repeat_interleave(cfg.group_size, 0).numpy(),
                          getattr(cfg, "trace_stride", 1))
    t1 = time.perf_counter()
    model.train()
    adv = group_advantages(rewards, cfg.group_size)
    last_only = run.method == "grpo"
    shared = dict(group_size=cfg.group_size, prompt_len=prompts.shape[1])
    lp, exit_pdf, tmask = per_loop_token_logprobs(model, ids, mask, cfg.temperature, last_only, **shared)
    with torch.no_grad():
        ref_lp = per_loop_token_logprobs(ref, ids, mask, cfg.temperature, True, **shared)[0][..., -1]
    if last_only:
        w = torch.ones(1)
    else:
        w = loop_weights(run.method, cfg.t_max, cfg.progressive_alpha,
                         exit_pdf, run.learned_logits)
    loss, info = rltt_loss(lp, adv, tmask, w, ref_lp, cfg.beta_kl)
    run.opt.zero_grad(set_to_none=True)
    loss.backward()
    gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    run.opt.step()
    t2 = time.perf_counter()
    zero_var = rewards.view(-1, cfg.group_size).std(1) == 0
    m = tmask.float()
    ep_mean = None if exit_pdf is None else ((exit_pdf.detach() * m[..., None]).sum((0, 1)) / m.sum()).tolist()
    run.append(reward=float(rewards.mean()), lucky=int(lucky.sum()), rewarded=int(rewards.sum()),
               zero_var=float(zero_var.float().mean()), kl=info.get("kl", 0.0),
               pg=info["pg"], grad_norm=float(gnorm), rollout_s=t1 - t0, update_s=t2 - t1, exit_pdf=ep_mean)


def train_rl(sft_model: LoopedLM, methods: Sequence[str], cfg, seed: int) -> dict[str, RLRun]:
    """Train every method in ``methods`` from the same SFT model, alternating step by step.

    Paired design (card, "Pitfalls"): at step s every method sees the same prompts and draws its rollouts
    from a generator seeded identically; the order of methods flips every step so that neither always
    runs first (which matters for the wall-time comparison of C2).
    """
    ref = clone_model(sft_model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    runs: dict[str, RLRun] = {}
    for m in methods:
        if m not in STRATEGIES:
            raise ValueError(f"unknown method {m!r}; choose from {', '.join(STRATEGIES)}")
        model = clone_model(sft_model)
        groups = [{"params": list(model.parameters())}]
        learned = None
        if m == "learned":
            learned = torch.zeros(cfg.t_max, requires_grad=True)
            groups.append({"params": [learned], "lr": 10 * cfg.rl_lr})
        runs[m] = RLRun(m, model, torch.optim.Adam(groups, lr=cfg.rl_lr, betas=(0.9, 0.999)), learned)
    rng = np.random.default_rng([seed, 12, 0x21])
    order = list(methods)
    for step in range(cfg.rl_steps):
        prompts, answers = rl_prompts(rng, cfg.prompts_per_step, cfg.pad_slots, getattr(cfg, "rl_depths", (4, 5, 6)))
        for m in (order if step % 2 == 0 else order[::-1]):
            gen = torch.Generator().manual_seed(int(seed) * 1_000_003 + step)
            rl_step(runs[m], ref, prompts, answers, cfg, gen)
    for r in runs.values():
        r.model.eval()
    return runs
