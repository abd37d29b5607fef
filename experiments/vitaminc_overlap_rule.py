"""How far word overlap alone goes on VitaminC: a rule, not a model.

    python experiments/vitaminc_overlap_rule.py

Each pair is put in a bucket by (share of the claim's words found in the evidence, rounded to
tenths; whether every claim token with a digit appears in the evidence). Each bucket predicts
the label most frequent among the training pairs in it. Prints the test accuracy and the
majority-class accuracy. Reads the `elmo data get vitaminc` splits.
"""
from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict

from elmo.data.fetch import DataError
from elmo.data.sources import get


def bucket(pair: dict) -> tuple:
    claim = [w.lower() for w in pair["claim"]]
    evidence = {w.lower() for w in pair["evidence"]}
    covered = sum(w in evidence for w in claim) / max(len(claim), 1)
    numbers = [w for w in claim if re.search(r"\d", w)]
    return round(covered * 10), (all(w in evidence for w in numbers) if numbers else None)


def read(split: str) -> list:
    with open(get("vitaminc") / f"{split}.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def main() -> int:
    try:
        train, test = read("train"), read("test")
    except DataError as e:
        # e.g. the bigbench release that carries VitaminC is no longer offered: say so in one line
        print(f"vitaminc_overlap_rule: {e}", file=sys.stderr)
        return 1
    votes = defaultdict(Counter)
    for pair in train:
        votes[bucket(pair)][pair["label"]] += 1
    majority = Counter(p["label"] for p in train).most_common(1)[0][0]

    def guess(pair: dict) -> str:
        seen = votes.get(bucket(pair))
        return seen.most_common(1)[0][0] if seen else majority

    rule = sum(guess(p) == p["label"] for p in test) / len(test)
    base = sum(majority == p["label"] for p in test) / len(test)
    print(f"overlap rule: {100 * rule:.2f}% test accuracy; majority class ({majority}): {100 * base:.2f}% "
          f"({len(train)} training pairs, {len(test)} test pairs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
