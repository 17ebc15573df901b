#!/usr/bin/env python3
"""Checks e3train.Head's training-time-test unroll against the public forward as
tests/tools/eagle3_tiny.py mirrors it (the code tests/test_eagle3.c checks
runtime/model/eagle3.c against): for random small weights, every anchor row a and every
step k, the unroll's logits must equal a chain drafted the way eagle3_draft.c drafts it
(committed rows 0..a over the target's features, then k staged rows at positions a+1..a+k,
each fed the previous row's output before the norm and the true next token).
Exit status 0 when the largest difference is below 1e-9 (float64)."""
import importlib.util
import os
import sys

import torch

import e3train

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("eagle3_tiny", os.path.join(here, "../../../tests/tools/eagle3_tiny.py"))
tiny = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tiny)


def main():
    torch.manual_seed(3)
    torch.set_default_dtype(torch.float64)
    H, nh, nkv, V, Vd, ffn, T, steps = 16, 4, 2, 50, 20, 24, 9, 3
    tc = {"embedding_length": H, "attention.head_count": nh, "attention.head_count_kv": nkv,
          "attention.layer_norm_rms_epsilon": 1e-5, "rope.freq_base": 10000.0}
    embd = torch.randn(V, H)
    m = e3train.Head(tc, Vd, embd, 1 + 0.1 * torch.randn(H), torch.randn(Vd, H) * 0.3, ffn=ffn).double()
    with torch.no_grad():
        for p in (m.in_norm, m.hid_norm, m.post_norm):
            p.add_(0.2 * torch.randn(H))
        m.fscale.copy_(torch.rand(3 * H) * 2 + 0.1)  # saved as fc * fscale
    feat = torch.randn(1, T, 3 * H)
    tok = torch.randint(0, V, (1, T))
    outs = m.unroll(feat, tok, steps)
    pre = "midlayer."
    W = {"fc.weight": m.fc * m.fscale[None], pre + "input_layernorm.weight": m.in_norm, pre + "hidden_norm.weight": m.hid_norm,
         pre + "self_attn.q_proj.weight": m.q, pre + "self_attn.k_proj.weight": m.k,
         pre + "self_attn.v_proj.weight": m.v, pre + "self_attn.o_proj.weight": m.o,
         pre + "post_attention_layernorm.weight": m.post_norm, pre + "mlp.gate_proj.weight": m.gate,
         pre + "mlp.up_proj.weight": m.up, pre + "mlp.down_proj.weight": m.down, "norm.weight": m.norm,
         "lm_head.weight": m.lm_head}
    W = {k: v.detach() for k, v in W.items()}
    cfg = {"rms_norm_eps": 1e-5, "num_attention_heads": nh, "num_key_value_heads": nkv, "hidden_size": H,
           "rope_theta": 10000.0, "_prefix": pre}
    ref = tiny.Head(W, cfg)
    fused = feat[0] @ W["fc.weight"].T
    worst, n = 0.0, 0
    for a in range(T - 1):
        # committed rows 0..a: feature at t, token t+1, position t
        rows_f, rows_t = fused[:a + 1], tok[0, 1:a + 2]
        x = ref.layer(embd[rows_t], rows_f, torch.arange(a + 1), tiny.causal(a + 1))
        last = x[-1]
        lg, _ = ref.logits(x[-1:])
        worst = max(worst, float((lg[0] - outs[0][0, a]).abs().max()))
        n += 1
        f, t = rows_f, rows_t
        for k in range(1, steps + 1):
            if a + 1 + k >= T:
                break
            f = torch.cat((f, last[None]), 0)
            t = torch.cat((t, tok[0, a + 1 + k:a + 2 + k]), 0)
            x = ref.layer(embd[t], f, torch.arange(a + 1 + k), tiny.causal(a + 1 + k))
            last = x[-1]
            lg, _ = ref.logits(x[-1:])
            worst = max(worst, float((lg[0] - outs[k][0, a]).abs().max()))
            n += 1
    print(f"check_e3: {n} rows (anchors x steps) against the public forward, max |logit difference| {worst:.3e}")
    sys.exit(0 if worst < 1e-9 else 1)


if __name__ == "__main__":
    main()
