#!/usr/bin/env python3
"""Writes the ConfigContainer override keys Megatron-Bridge takes (section.field), for the test of
`cleave plan --format bridge` (tests/planner/test_export_bridge.cpp), from two git checkouts:

    scripts/bridge_fields.py BRIDGE_REPO BRIDGE_COMMIT MEGATRON_REPO > tests/data/megatron_bridge_fields.txt

The Megatron-LM commit is the one BRIDGE_COMMIT pins as its 3rdparty/Megatron-LM submodule. Each
section is the dataclass ConfigContainer holds under that name, with the fields of its bases
(Bridge's own classes and the Megatron-Core / Megatron-Training ones they extend), read with ast,
nothing imported.
"""
import ast
import subprocess
import sys

BRIDGE, BRIDGE_COMMIT, MEGATRON = sys.argv[1], sys.argv[2], sys.argv[3]


def show(repo, commit, path):
    return subprocess.run(["git", "-C", repo, "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def submodule_commit():
    out = subprocess.run(["git", "-C", BRIDGE, "ls-tree", BRIDGE_COMMIT, "3rdparty/Megatron-LM"],
                         check=True, capture_output=True, text=True).stdout.split()
    return out[2]


MCORE_COMMIT = submodule_commit()
FILES = [  # (repo, commit, path)
    (BRIDGE, BRIDGE_COMMIT, "src/megatron/bridge/training/config.py"),
    (BRIDGE, BRIDGE_COMMIT, "src/megatron/bridge/training/comm_overlap.py"),
    (BRIDGE, BRIDGE_COMMIT, "src/megatron/bridge/training/mixed_precision.py"),
    (BRIDGE, BRIDGE_COMMIT, "src/megatron/bridge/models/gpt_provider.py"),
    (BRIDGE, BRIDGE_COMMIT, "src/megatron/bridge/models/model_provider.py"),
    (BRIDGE, BRIDGE_COMMIT, "src/megatron/bridge/models/transformer_config.py"),
    (BRIDGE, BRIDGE_COMMIT, "src/megatron/bridge/models/hybrid/hybrid_provider.py"),
    (MEGATRON, MCORE_COMMIT, "megatron/core/distributed/distributed_data_parallel_config.py"),
    (MEGATRON, MCORE_COMMIT, "megatron/core/optimizer/optimizer_config.py"),
    (MEGATRON, MCORE_COMMIT, "megatron/core/transformer/transformer_config.py"),
    (MEGATRON, MCORE_COMMIT, "megatron/core/model_parallel_config.py"),
    (MEGATRON, MCORE_COMMIT, "megatron/core/datasets/gpt_dataset.py"),
    (MEGATRON, MCORE_COMMIT, "megatron/core/datasets/blended_megatron_dataset_config.py"),
    (MEGATRON, MCORE_COMMIT, "megatron/training/config/training_config.py"),
    (MEGATRON, MCORE_COMMIT, "megatron/training/config/common_config.py"),
]

classes = {}  # (path, name) -> (fields, [base names])
aliases = {}  # (path, local name) -> imported class name
by_name = {}  # class name -> [(path, name)]
for repo, commit, path in FILES:
    try:
        tree = ast.parse(show(repo, commit, path))
    except subprocess.CalledProcessError:
        continue
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                aliases[(path, a.asname or a.name)] = a.name
        if isinstance(node, ast.ClassDef):
            fields = [s.target.id for s in node.body
                      if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
            bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
            classes[(path, node.name)] = (fields, bases)
            by_name.setdefault(node.name, []).append((path, node.name))


def fields_of(path, name, seen=None):
    seen = seen if seen is not None else set()
    key = (path, name)
    if key not in classes:
        real = aliases.get(key, name)
        cands = [k for k in by_name.get(real, []) if k != key]
        return set().union(*(fields_of(p, n, seen) for p, n in cands)) if cands else set()
    if key in seen:
        return set()
    seen.add(key)
    own, bases = classes[key]
    out = set(own)
    for b in bases:
        out |= fields_of(path, b, seen)
    return out


CFG = "src/megatron/bridge/training/config.py"
SECTIONS = {
    "train": (CFG, "TrainingConfig"),
    "optimizer": (CFG, "OptimizerConfig"),
    "ddp": (CFG, "DistributedDataParallelConfig"),
    "dataset": (CFG, "GPTDatasetConfig"),
    "comm_overlap": ("src/megatron/bridge/training/comm_overlap.py", "CommOverlapConfig"),
    "mixed_precision": ("src/megatron/bridge/training/mixed_precision.py", "MixedPrecisionConfig"),
    # GPT models, and the hybrid (Mamba) ones, which add hybrid_layer_pattern
    "model": ("src/megatron/bridge/models/gpt_provider.py", "GPTModelProvider",
              "src/megatron/bridge/models/hybrid/hybrid_provider.py", "HybridModelProvider"),
}
print(f"# Megatron-Bridge ConfigContainer override keys: NVIDIA-NeMo/Megatron-Bridge@{BRIDGE_COMMIT}")
print(f"# with NVIDIA/Megatron-LM@{MCORE_COMMIT} (its 3rdparty/Megatron-LM); scripts/bridge_fields.py")
print("mixed_precision")  # ConfigContainer.mixed_precision also takes a recipe name
for section, spec in SECTIONS.items():
    found = set()
    for path, name in zip(spec[::2], spec[1::2]):
        found |= fields_of(path, name)
    fs = sorted(f for f in found if not f.startswith("_"))
    if not fs:
        sys.exit(f"no fields found for {section} ({spec})")
    for f in fs:
        print(f"{section}.{f}")
