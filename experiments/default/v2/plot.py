"""The default model's learning curve over both versions, against all tokens seen.

    python experiments/default/v2/plot.py    # writes experiments/default/v2/curve.png

v1 (experiments/default/log.jsonl) trained from scratch; v2 (experiments/default/v2/log.jsonl)
continued from v1's weights, so its tokens are counted after v1's 9.78M. v1's validation
figures were measured in the earlier, stateful definition of perplexity; v2's are stateless
(each sentence from a zero state). The point marked at the join is v1's shipped weights
measured in v2's definition on the same 480 sentences (`elmo perplexity elmo/resources/default
runs/default-v2/valid_sample.txt` before v2 was shipped: 174.4).
"""
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
V1_STATELESS = 174.39  # see the docstring


def events(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


v1, v2 = events(HERE.parent / "log.jsonl"), events(HERE / "log.jsonl")
per_step = 128 * 20
offset = max(e["tokens"] for e in v1 if e["event"] == "train") / 1e6
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
for log, shift, name in ((v1, 0.0, "v1"), (v2, offset, "v2 (warm start)")):
    train = [e for e in log if e["event"] == "train"]
    left.plot([shift + e["tokens"] / 1e6 for e in train], [e["sampled_ppl"] if "sampled_ppl" in e else e["ppl"]
                                                           for e in train], lw=1, label=name)
    valid = [e for e in log if e["event"] == "eval" and e.get("split") == "valid"]
    style = "o--" if name == "v1" else "o-"
    right.plot([shift + e["step"] * per_step / 1e6 for e in valid], [e["ppl"] for e in valid], style,
               label=f"{name}: " + ("stateful (earlier definition)" if name == "v1" else "stateless"))
right.plot([offset], [V1_STATELESS], "k*", ms=12, label="v1's weights, stateless")
left.set(yscale="log", xlabel="tokens seen, both versions (millions)", ylabel="exp(training loss)",
         title="training (sampled softmax, 2,048 negatives)")
right.set(yscale="log", xlabel="tokens seen, both versions (millions)",
          ylabel="perplexity, fwd and bwd averaged", title="validation: 480 held-out sentences, full softmax")
for ax in (left, right):
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(HERE / "curve.png", dpi=110)
print(f"wrote {HERE / 'curve.png'}")
