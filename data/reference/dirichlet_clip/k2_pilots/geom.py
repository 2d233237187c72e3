import torch
from repro import dirichlet_clip as dc
from repro.dirichlet_clip.experiments import build_setup
cfg = dc.Config.from_profile("full", seed=100)
S = build_setup(cfg)
G1, G2 = S.G["T1"], S.G["T2"]
Q, _ = torch.linalg.qr(G1.T)  # 64x5
proj = (G2 @ Q)  # components in span
print("fraction of |g| of T2 prompts in span(T1 prompts):", (proj.norm(dim=1)**2).tolist())
print("cos T1 x T2\n", (G1 @ G2.T).numpy().round(2))
with torch.no_grad():
    f = S.clip.image_features(S.suite["T2"].images)
    print("image feats T2 in span(T1 prompts):", float(((f @ Q).norm(dim=1)**2).mean()))
    f1 = S.clip.image_features(S.suite["T1"].images)
    print("image feats T1 in span(T1 prompts):", float(((f1 @ Q).norm(dim=1)**2).mean()))
