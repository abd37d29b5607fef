"""What storing a model in lower precision costs, measured against the float32 model.

    python -m elmo.training.precision REFERENCE CANDIDATE held_out.txt --out precision.json

REFERENCE and CANDIDATE are model folders of the same model (e.g. the float32 export and a
float16 copy written by :mod:`elmo.training.ship`). Reports:

* ``activations``: per layer of the biLM, over every token of the text, the largest absolute
  difference between the two models' vectors, the reference's largest absolute value and
  root mean square (for scale), and the smallest cosine similarity between the two vectors
  of a token;
* ``perplexity``: forward, backward and average perplexity of the text (full softmax, each
  sentence from a zero state as ``elmo perplexity`` computes it) for the reference, for the
  candidate's biLM with the reference softmax, for the reference biLM with the candidate's
  softmax, and for the candidate; with the relative change of each against the reference.
"""
from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path
from typing import Any, Dict, List, Sequence

import numpy as np
import torch

from ..data.corpus import expand_paths, iter_file_sentences
from ..embedding import Embedder
from ..runtime import set_threads
from ..user_paths import expand_args
from ..io import atomic_write_text
from .. import strict_json
from .evaluate import perplexity
from .export import load_language_model


def activation_differences(reference, candidate, sentences: Sequence[Sequence[str]],
                           batch_size: int = 64) -> List[Dict[str, float]]:
    """Per layer: ``max_abs_diff``, ``ref_max_abs``, ``ref_rms``, ``min_cosine`` over all tokens."""
    ref = np.concatenate(Embedder(reference, batch_size=batch_size).embed_sentences(sentences), axis=1)
    cand = np.concatenate(Embedder(candidate, batch_size=batch_size).embed_sentences(sentences), axis=1)
    rows = []
    for j in range(ref.shape[0]):
        r, c = ref[j].astype(np.float64), cand[j].astype(np.float64)
        cos = (r * c).sum(-1) / np.maximum(np.linalg.norm(r, axis=-1) * np.linalg.norm(c, axis=-1), 1e-30)
        rows.append({"layer": j, "max_abs_diff": float(np.abs(r - c).max()), "ref_max_abs": float(np.abs(r).max()),
                     "ref_rms": float(np.sqrt((r ** 2).mean())), "min_cosine": float(cos.min())})
    return rows


def compare(reference: str | Path, candidate: str | Path, texts: Sequence[str], batch_size: int = 32) -> Dict:
    ref_model, vocab = load_language_model(reference)
    cand_model, cand_vocab = load_language_model(candidate)
    if cand_vocab.words != vocab.words:
        raise ValueError(f"{candidate}: its vocabulary is not that of {reference}; compare two copies of one model")
    # (another shape was a RuntimeError deep in load_state_dict)
    ref_shape, cand_shape = ref_model.options.to_dict(), cand_model.options.to_dict()
    for part in ("lstm", "char_cnn"):
        if ref_shape.get(part) != cand_shape.get(part):
            raise ValueError(f"{candidate}: its {part} options are not those of {reference}; compare two copies "
                             f"of one model")
    paths = expand_paths(texts)
    sentences = list(iter_file_sentences(paths))
    settings = {"definition": "stateless"}  # every sentence from a zero state (elmo.training.evaluate)

    def mixed(bilm_from, softmax_from):
        model = copy.deepcopy(ref_model)
        model.bilm.load_state_dict(bilm_from.bilm.state_dict())
        model.softmax.load_state_dict(softmax_from.softmax.state_dict())
        return model

    variants = {"reference": ref_model, "candidate_bilm": mixed(cand_model, ref_model),
                "candidate_softmax": mixed(ref_model, cand_model), "candidate": cand_model}
    ppl: Dict[str, Dict[str, Any]] = {}
    for name, model in variants.items():
        result = perplexity(model, sentences, vocab, batch_size, torch.device("cpu"))
        ppl[name] = {k: result[k] for k in ("ppl_fwd", "ppl_bwd", "ppl", "targets")}
    base = ppl["reference"]
    for name in variants:
        ppl[name]["relative_change"] = {k: ppl[name][k] / base[k] - 1 for k in ("ppl_fwd", "ppl_bwd", "ppl")}
    return {"reference": str(reference), "candidate": str(candidate), "texts": [str(p) for p in paths],
            "sentences": len(sentences), "tokens": sum(map(len, sentences)), "perplexity_settings": settings,
            "activations": activation_differences(ref_model.bilm, cand_model.bilm, sentences),
            "perplexity": ppl}


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m elmo.training.precision`` (its path arguments'
    destinations are among :data:`elmo.user_paths.PATH_SETTINGS`)."""
    p = argparse.ArgumentParser(prog="python -m elmo.training.precision", description=__doc__.split("\n")[0],
                                allow_abbrev=False)
    p.add_argument("reference", help="model folder (float32)")
    p.add_argument("candidate", help="model folder to compare (e.g. float16)")
    p.add_argument("text", nargs="+", help="held-out text: files, globs or folders")
    p.add_argument("--out", type=Path, help="write the JSON here")
    p.add_argument("--threads", type=int)
    return p


def main(argv=None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    set_threads(args.threads)
    try:   # (a quoted "~/m" made a folder named "~", as in the elmo command: see elmo.user_paths)
        expand_args(args)
        result = compare(args.reference, args.candidate, args.text)
    except (ValueError, OSError) as e:   # (a traceback, for a missing folder or another model)
        from ..cli import one_line
        print(f"{p.prog}: error: {one_line(e)}", file=sys.stderr)
        return 1
    for row in result["activations"]:
        print(f"layer {row['layer']}: max |diff| {row['max_abs_diff']:.3g} (reference max |x| "
              f"{row['ref_max_abs']:.3g}, rms {row['ref_rms']:.3g}), min cosine {row['min_cosine']:.8f}")
    for name, r in result["perplexity"].items():
        print(f"{name:>18}: forward {r['ppl_fwd']:.4f}  backward {r['ppl_bwd']:.4f}  average {r['ppl']:.4f}  "
              f"(average {100 * r['relative_change']['ppl']:+.4f}%)")
    if args.out:
        atomic_write_text(args.out, strict_json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
