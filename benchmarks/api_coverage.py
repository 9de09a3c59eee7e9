"""API coverage: which public names of TensorFlow's `tf.compat.v1` jitflow has.

`python benchmarks/api_coverage.py [--out benchmarks/results/coverage.md] [--json PATH]`

(Not named coverage.py: Numba imports the `coverage` package, which a script of that name
in benchmarks/ would shadow for every benchmark run from that folder.)

The names come from the installed TensorFlow's generated API files
(`tensorflow/_api/v2/compat/v1/<module>/__init__.py`), read as text with `ast` (nothing of
TensorFlow is imported or executed, so lazily loaded Keras parts cannot fail the listing).
TensorFlow 2.x serves `tf.compat.v1.layers` from Keras; for it the script uses TF 1.15's list
of `tf.layers` names (`TF1_LAYERS`). A name counts as present when the same attribute path
resolves on `jitflow` (`jitflow.nn.nce_loss` for `tf.compat.v1.nn.nce_loss`).

The table (totals per module, then every missing name) is written atomically.
"""
from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

MODULES = ("", "nn", "train", "layers", "losses", "metrics", "math", "linalg", "image",
           "random", "data", "strings", "summary", "initializers", "errors", "saved_model", "io",
           "gfile")

# TF 1.15's `tf.layers` (TensorFlow 2.x builds it from Keras' legacy layers at import time).
TF1_LAYERS = (
    "AveragePooling1D", "AveragePooling2D", "AveragePooling3D", "BatchNormalization", "Conv1D",
    "Conv2D", "Conv2DTranspose", "Conv3D", "Conv3DTranspose", "Dense", "Dropout", "Flatten",
    "InputSpec", "Layer", "MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "SeparableConv1D",
    "SeparableConv2D", "average_pooling1d", "average_pooling2d", "average_pooling3d",
    "batch_normalization", "conv1d", "conv2d", "conv2d_transpose", "conv3d", "conv3d_transpose",
    "dense", "dropout", "experimental", "flatten", "max_pooling1d", "max_pooling2d",
    "max_pooling3d", "separable_conv1d", "separable_conv2d",
)

# names the generated files attach outside their import lines
EXTRA_TOP = ("layers", "flags", "keras")

# Gaps left on purpose, with the reason: patterns over "module.name" ("tf" for the top level).
GAPS = {
    "file formats (gfile, SavedModel, TFRecord, tf.Example, image codecs, file ops): a "
    "separate piece of work": [
        "gfile.*", "saved_model.*", "tf.gfile", "tf.saved_model", "io.TFRecord*",
        "io.tf_record_iterator", "io.parse_*", "io.*Feature*", "tf.*Feature*",
        "tf.parse_*", "io.decode_proto", "io.encode_proto", "io.serialize_*",
        "io.deserialize_*", "tf.serialize_*", "tf.deserialize_*", "io.parse_tensor",
        "tf.parse_tensor", "io.read_file", "io.write_file", "tf.read_file", "tf.write_file",
        "io.decode_json_example", "tf.decode_json_example", "io.write_graph", "io.gfile",
        "image.decode_*", "image.encode_*", "image.extract_jpeg_shape", "image.is_jpeg",
        "image.*jpeg_quality", "io.decode_*", "io.encode_*", "io.extract_jpeg_shape",
        "io.is_jpeg", "tf.TFRecordReader", "tf.LMDBReader", "data.TFRecordDataset",
        "tf.python_io", "train.Example", "train.SequenceExample", "train.Feature*",
        "train.BytesList", "train.FloatList", "train.Int64List", "train.summary_iterator",
        "tf.MetaGraphDef", "tf.GraphDef", "tf.NodeDef", "tf.AttrValue", "tf.NameAttrList",
        "tf.HistogramProto", "tf.SummaryMetadata", "tf.LogMessage", "tf.TensorInfo",
        "tf.make_tensor_proto", "tf.make_ndarray", "train.SaverDef",
        "train.generate_checkpoint_state_proto"],
    "recurrent networks: a separate piece of work": [
        "nn.rnn_cell", "nn.*dynamic_rnn", "nn.static_*rnn", "nn.raw_rnn", "tf.reverse_sequence"],
    "distributed training (jitflow is one process by design)": [
        "train.Server", "train.Cluster*", "train.JobDef", "train.ServerDef",
        "train.replica_device_setter", "train.SyncReplicasOptimizer", "tf.distribute",
        "train.WorkerSessionCreator", "tf.DeviceSpec", "tf.ConditionalAccumulator*",
        "tf.SparseConditionalAccumulator", "tf.CriticalSection"],
    "TF2 / eager-only API (jitflow is TF1 graph mode)": [
        "tf.GradientTape", "tf.function", "tf.Module", "tf.*Spec", "tf.TypeSpec",
        "data.DatasetSpec", "tf.Ragged*", "tf.ragged*", "tf.enable_*", "tf.disable_*",
        "tf.*_enabled", "tf.executing_eagerly_outside_functions", "tf.wrap_function",
        "tf.vectorized_map", "tf.recompute_grad", "tf.variable_creator_scope",
        "tf.experimental", "*.experimental", "tf.types", "tf.autograph", "tf.keras",
        "tf.lite", "tf.mlir", "tf.xla", "tf.tpu", "tf.mixed_precision", "tf.profiler",
        "tf.sysconfig", "tf.test", "tf.compat", "tf.raw_ops", "tf.config", "tf.user_ops",
        "tf.load_*library", "tf.load_op_library", "tf.resource_loader", "tf.nondifferentiable_"
        "batch_function", "data.NumpyIterator", "data.ThreadingOptions", "tf.__internal__",
        "tf.is_symbolic_tensor", "random.Generator", "random.*generator", "random.Algorithm",
        "random.create_rng_state", "random.split", "random.fold_in",
        "summary.all_v2_summary_ops", "summary.initialize", "tf.audio", "tf.signal",
        "tf.spectral", "tf.*fft*", "tf.MONOLITHIC_BUILD", "tf.*VERSION*", "tf.*COMPILER*",
        "tf.CXX*", "tf.GIT_VERSION"],
    "complex and quantized dtypes (not supported)": [
        "tf.complex*", "tf.qint*", "tf.quint*", "tf.bfloat16", "tf.to_bfloat16",
        "tf.to_complex*", "tf.quantiz*", "tf.dequantize", "tf.fake_quant*", "tf.quantization",
        "nn.quantized_*", "tf.real", "tf.imag", "tf.conj", "tf.angle", "math.real",
        "math.imag", "math.conj", "math.angle", "tf.uint16", "tf.uint32", "tf.uint64",
        "tf.QUANTIZED_DTYPES"],
    "stateless and counter-based random numbers (TF's exact streams cannot be reproduced)": [
        "random.stateless_*", "random.sobol_sample", "math.sobol_sample",
        "tf.random_index_shuffle"],
    "TF's FarmHash/SipHash string hashing and Unicode ops": [
        "strings.to_hash_bucket*", "tf.string_to_hash_bucket*", "strings.unicode_*",
        "tf.fingerprint"],
    "convolution and pooling kernels beyond 2-D (3-D, depthwise, separable, dilation, "
    "fractional) and CTC: model kernels, not input-side work": [
        "nn.*conv3d*", "nn.conv3d*", "nn.*depthwise*", "nn.separable_conv2d", "nn.dilation2d",
        "nn.erosion2d", "nn.fractional_*", "nn.*pool3d", "nn.pool", "nn.ctc_*",
        "nn.collapse_repeated", "nn.max_pool_with_argmax", "layers.*3D*", "layers.*3d*",
        "layers.Separable*", "layers.separable_*", "nn.conv_transpose", "nn.conv1d_transpose",
        "nn.atrous_conv2d_transpose", "nn.with_space_to_batch", "nn.space_to_batch",
        "tf.*space_to_batch*", "tf.batch_to_space*", "tf.extract_*_patches",
        "image.extract_*", "tf.conv", "tf.conv2d_backprop_*_v2", "nn.approx_*",
        "math.approx_*", "tf.approx_top_k"],
    "LinearOperator classes": ["linalg.LinearOperator*"],
}


def api_dir() -> str:
    """The folder of the installed TensorFlow's `tf.compat.v1` API files."""
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("api_coverage.py needs TensorFlow installed (pip install -e '.[bench]')")
    base = list(spec.submodule_search_locations)[0]
    path = os.path.join(base, "_api", "v2", "compat", "v1")
    if not os.path.isdir(path):
        raise SystemExit(f"no tf.compat.v1 API files under {path}")
    return path


def tf_names(module: str, base: str) -> list:
    """Public names of `tf.compat.v1.<module>` from its generated API file."""
    if module == "layers":
        return sorted(TF1_LAYERS)
    path = os.path.join(base, *module.split("."), "__init__.py") if module else \
        os.path.join(base, "__init__.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                n = a.asname or a.name
                if not n.startswith("_"):
                    names.add(n)
    if not module:
        names.update(EXTRA_TOP)
    return sorted(names)


def has(root, module: str, name: str) -> bool:
    """Whether `root.<module>.<name>` resolves."""
    obj = root
    for part in [p for p in module.split(".") if p] + [name]:
        try:
            obj = getattr(obj, part)
        except Exception:  # noqa: BLE001  (a lazy attribute may raise anything)
            return False
    return True


def survey() -> dict:
    """{module: {"total": n, "have": n, "missing": [names]}} for every module in MODULES."""
    import jitflow
    base = api_dir()
    out = {}
    for m in MODULES:
        names = tf_names(m, base)
        missing = [n for n in names if not has(jitflow, m, n)]
        out[m] = {"total": len(names), "have": len(names) - len(missing), "missing": missing}
    return out


def render(table: dict, before: dict | None = None) -> str:
    """The Markdown report: totals per module (with an earlier survey if given), then gaps."""
    lines = ["# jitflow API coverage of `tf.compat.v1`", "",
             "Generated by `python benchmarks/api_coverage.py` from the installed TensorFlow's API "
             "files; a name is present when the same attribute path resolves on `jitflow`.", ""]
    head = "| module | TF names | jitflow has | share |"
    sep = "|---|---:|---:|---:|"
    if before:
        head += " before |"
        sep += "---:|"
    lines += [head, sep]
    tot = have = tot_b = have_b = 0
    for m, r in table.items():
        label = f"`tf.{m}`" if m else "`tf` (top level)"
        share = 100 * r["have"] / max(r["total"], 1)
        row = f"| {label} | {r['total']} | {r['have']} | {share:.0f}% |"
        tot += r["total"]
        have += r["have"]
        if before:
            b = before.get(m, {"have": 0, "total": 0})
            row += f" {b['have']} |"
            tot_b += b["total"]
            have_b += b["have"]
        lines.append(row)
    row = f"| **all** | {tot} | {have} | {100 * have / max(tot, 1):.0f}% |"
    if before:
        row += f" {have_b} |"
    lines += [row, ""]
    deliberate, rest = classify(table)
    lines += ["## Gaps left on purpose", ""]
    for reason, names in deliberate.items():
        if names:
            lines.append(f"- {reason} ({len(names)}): " + ", ".join(f"`{n}`" for n in names))
    lines += ["", f"## Other missing names ({sum(len(v) for v in rest.values())})", ""]
    for m, names in rest.items():
        if names:
            label = f"tf.{m}" if m else "tf"
            lines.append(f"**{label}** ({len(names)}): " + ", ".join(f"`{n}`" for n in names))
            lines.append("")
    return "\n".join(lines) + "\n"


def classify(table: dict) -> tuple:
    """({reason: ["module.name", ...]}, {module: [names not covered by a reason]})."""
    import fnmatch
    deliberate = {reason: [] for reason in GAPS}
    rest: dict = {}
    for m, r in table.items():
        for n in r["missing"]:
            key = f"{m or 'tf'}.{n}"
            for reason, patterns in GAPS.items():
                if any(fnmatch.fnmatchcase(key, p) for p in patterns):
                    deliberate[reason].append(key)
                    break
            else:
                rest.setdefault(m, []).append(n)
    return deliberate, rest


def write_atomic(path: str, text: str) -> None:
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".coverage-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "coverage.md"))
    ap.add_argument("--json", help="also write the survey as JSON here")
    ap.add_argument("--before", help="a JSON survey to show beside this one")
    args = ap.parse_args(argv)
    table = survey()
    before = None
    if args.before:
        with open(args.before, encoding="utf-8") as f:
            before = json.load(f)
    write_atomic(args.out, render(table, before))
    if args.json:
        write_atomic(args.json, json.dumps(table, indent=1, sort_keys=True) + "\n")
    tot = sum(r["total"] for r in table.values())
    have = sum(r["have"] for r in table.values())
    for m, r in table.items():
        print(f"{('tf.' + m) if m else 'tf':18s} {r['have']:4d} / {r['total']:4d}")
    print(f"{'all':18s} {have:4d} / {tot:4d}  -> {args.out}")
    deliberate, rest = classify(table)
    print(f"left on purpose: {sum(len(v) for v in deliberate.values())}, other missing: "
          f"{sum(len(v) for v in rest.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
