"""The default model's learning curve over all three versions, against all tokens seen.

    python experiments/default/v3/plot.py    # writes experiments/default/v3/curve.png

v1 (experiments/default/log.jsonl) trained from scratch; v2 (experiments/default/v2/log.jsonl)
continued from v1's weights; v3 (experiments/default/v3/log.jsonl) is v2's run continued from
its last checkpoint, under bf16 autocast. Tokens after v1 are counted from v1's 9.78M. v1's
validation figures are in the earlier, stateful definition of perplexity; v2's and v3's are
stateless (each sentence from a zero state), on the same 480 sentences, always in fp32. The
vertical lines mark v3's learning-rate changes.
"""
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT = HERE.parent
V1_STATELESS = 174.39  # v1's shipped weights, stateless, on the same sentences (see v2/plot.py)


def events(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


v1, v2, v3 = events(DEFAULT / "log.jsonl"), events(DEFAULT / "v2" / "log.jsonl"), events(HERE / "log.jsonl")
per_step = 128 * 20
offset = max(e["tokens"] for e in v1 if e["event"] == "train") / 1e6
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
for log, shift, name in ((v1, 0.0, "v1"), (v2, offset, "v2 (warm start)"), (v3, offset, "v3 (v2's run on, bf16)")):
    train = [e for e in log if e["event"] == "train"]
    left.plot([shift + e["tokens"] / 1e6 for e in train],
              [e["sampled_ppl"] if "sampled_ppl" in e else e["ppl"] for e in train], lw=1, label=name)
    valid = [e for e in log if e["event"] == "eval" and e.get("split") == "valid"]
    style = "o--" if name == "v1" else "o-"
    right.plot([shift + e["step"] * per_step / 1e6 for e in valid], [e["ppl"] for e in valid], style, ms=3,
               label=f"{name}: " + ("stateful (earlier definition)" if name == "v1" else "stateless"))
right.plot([offset], [V1_STATELESS], "k*", ms=12, label="v1's weights, stateless")
for e in v3:
    if e["event"] == "resume" and e.get("lr") != e.get("lr_before"):
        x = offset + e["step"] * per_step / 1e6
        for ax in (left, right):
            ax.axvline(x, color="grey", lw=0.8, ls=":")
        right.annotate(f"lr {e['lr']:g}", (x, 0.97), xycoords=("data", "axes fraction"), fontsize=7,
                       rotation=90, va="top", ha="right")
left.set(yscale="log", xlabel="tokens seen, all versions (millions)", ylabel="exp(training loss)",
         title="training (sampled softmax, 2,048 negatives)")
right.set(yscale="log", xlabel="tokens seen, all versions (millions)",
          ylabel="perplexity, fwd and bwd averaged", title="validation: 480 held-out sentences, full softmax")
for ax in (left, right):
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(HERE / "curve.png", dpi=110)
print(f"wrote {HERE / 'curve.png'}")
