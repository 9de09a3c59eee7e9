"""Which registered ops have no kernel lowering, and why: every op registered without a
lowering (no `scalar` form, no `lower`) and not host work by design (kind "host") must be in
`REFERENCE_ONLY` with a reason, so a newly registered op cannot silently run only through its
NumPy reference between kernels."""
from __future__ import annotations

import jitflow  # noqa: F401  (registers every op)
from jitflow.ops.registry import all_op_defs

_LAPACK = ("a LAPACK factorization: the kernel IR has no library-call node for batched "
           "linear algebra yet (LibCall covers convolutions and pooling only)")
_STATE = "scatters into variables: updates in place at run-time indices, not lowered yet"
_RANDOM = "random draws come from the session's NumPy generator (the stream TF1 code expects)"
_DATA_SHAPE = "the output shape depends on the input values (known only after the run)"
_SPECIAL = "special function with no primitive in mathlib/mathir yet"
_SORT = "sorting / selection per row: no sort primitive in the loop form yet"
_HOST = "Python callback, printing or assertion: host work"

#: op type -> why it has no kernel lowering (it runs as a reference step between kernels)
REFERENCE_ONLY = {
    # linear algebra
    **{t: _LAPACK for t in ("Cholesky", "CholeskyGrad", "MatrixInverse", "MatrixSolve",
                            "MatrixTriangularSolve", "MatrixDeterminant",
                            "LogMatrixDeterminant", "Qr", "Svd", "SelfAdjointEigV2", "Pinv")},
    "Einsum": "not lowered yet: a general contraction (its equation parsed into loop axes)",
    # state
    **{t: _STATE for t in ("ScatterAdd", "ScatterDiv", "ScatterMax", "ScatterMin",
                           "ScatterMul", "ScatterNdAdd", "ScatterNdSub", "ScatterNdUpdate",
                           "ScatterSub", "ScatterUpdate", "StridedSliceAssign")},
    "IsVariableInitialized": "reads the session's variable store, not a tensor",
    "ReportUninitializedVariables": "reads the session's variable store, not a tensor",
    "VariableOrInitialValue": "reads the session's variable store, not a tensor",
    "LoopVar": "a while-loop carried value, fed by the loop driver",
    # random
    **{t: _RANDOM for t in ("Multinomial", "RandomGamma", "RandomOrthogonal",
                            "RandomPoissonV2", "RandomShuffle", "RandomStandardNormal",
                            "RandomUniform", "RandomUniformInt", "TruncatedNormal")},
    # value-dependent shapes
    **{t: _DATA_SHAPE for t in ("BooleanMask", "BooleanMaskGrad", "Unique", "Where",
                                "BroadcastArgs", "TileMultiples")},
    # special functions
    **{t: _SPECIAL for t in ("Digamma", "Erfc", "Lgamma", "Polygamma", "Erfinv", "Ndtri",
                             "Igamma", "Igammac", "Zeta")},
    # sorting
    **{t: _SORT for t in ("ArgSort", "TopKV2", "TopKGrad", "InTopKV2", "SearchSorted")},
    # host
    **{t: _HOST for t in ("Assert", "CheckNumerics", "Print", "PrintV2", "PyFunc",
                          "PyFuncStateless", "CustomGradient", "CondPick", "EnsureShape")},
    # not lowered yet (loop forms the IR could express; future work)
    **{t: "not lowered yet: a scan along an axis (sequential carried sum/product)"
       for t in ("Cumsum", "Cumprod")},
    **{t: "not lowered yet: scattered adds at computed positions of several index axes"
       for t in ("ScatterNd", "GatherNd", "GatherNdGrad", "Bincount", "HistogramFixedWidth",
                 "PadBorderSum")},
    "TensorScatterUpdate": "not lowered yet: stores at computed positions where the last of "
                           "repeated indices must win (an ordered scatter)",
    **{t: "not lowered yet: segment reductions other than an unsorted sum"
       for t in ("SegmentReduce", "UnsortedSegmentReduce", "SegmentProdGrad",
                 "SegmentIdsClip", "SegmentIdsMask", "ProdGrad")},
    **{t: "not lowered yet: index arithmetic the Take items do not express"
       for t in ("DiagPart", "MatrixBandPart", "MatrixSetDiag", "ReverseSequence", "Roll",
                 "InvertPermutation", "SequenceMask")},
    **{t: "not lowered yet: windowed sums across channels" for t in ("LRN", "LRNGrad")},
}


def _unlowered() -> set:
    return {d.type for d in all_op_defs()
            if d.lower is None and d.scalar is None and d.kind != "host"}


def test_every_op_without_a_lowering_is_listed_with_a_reason():
    missing = sorted(_unlowered() - set(REFERENCE_ONLY))
    assert not missing, (f"ops with no kernel lowering and no entry in REFERENCE_ONLY: "
                         f"{missing}; give them a lowering (see jitflow/compiler/lower.py) "
                         "or list them with the reason")


def test_the_list_names_no_op_that_has_a_lowering():
    registered = {d.type for d in all_op_defs()}
    stale = sorted(t for t in REFERENCE_ONLY if t not in _unlowered())
    assert not stale, (f"REFERENCE_ONLY lists ops that have a lowering or are not "
                       f"registered: {stale} (registered: "
                       f"{[t for t in stale if t in registered]})")
    assert all(REFERENCE_ONLY[t].strip() for t in REFERENCE_ONLY)


def test_the_lowered_ops_of_this_work_are_not_reference_only():
    for t in ("Squeeze", "ArgMax", "ArgMin", "BatchMatMulV2", "SoftmaxCrossEntropyWithLogits",
              "UnsortedSegmentSum", "LinSpace", "Diag", "MatrixDiag", "MatrixDiagPart"):
        assert t not in _unlowered(), t
