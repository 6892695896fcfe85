#!/usr/bin/env python3
"""Analyse a jax.profiler.trace xplane.pb of a K-step ELECTRA training call (one XLA module, while loop
whose body is a CUDA graph / command buffer).  Usage:
  python studies/gpu_profile/breakdown.py <HOST.xplane.pb> <label> [steps=10]
Prints: per-step GPU busy/launch/gap stats, host-side per-call overheads, top kernels, categories.
Kernel -> HLO mapping: the optimized HLO module ("Hlo Proto" in the /host:metadata plane) is parsed; XLA
names each kernel after the first fusion that uses it and reuses it for structurally identical fusions,
so every fusion is fingerprinted and a kernel's time is split evenly over the fusions sharing its
fingerprint (whose op_name metadata then decides the category)."""

import collections
import hashlib
import json
import os
import re
import statistics
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
from tensorflow.compiler.xla.service import hlo_pb2
from tensorflow.tsl.profiler.protobuf import xplane_pb2

if len(sys.argv) < 3:  # (had been an IndexError)
    sys.exit("usage: python studies/gpu_profile/breakdown.py HOST.xplane.pb LABEL [STEPS]")
path, label = sys.argv[1], sys.argv[2]
STEPS = int(sys.argv[3]) if len(sys.argv) > 3 else 10
xs = xplane_pb2.XSpace()
xs.ParseFromString(open(path, "rb").read())
P = {p.name: p for p in xs.planes}
gpu = P["/device:GPU:0"]
sm = gpu.stat_metadata
em = gpu.event_metadata


def sv(s, smd):
    f = s.WhichOneof("value")
    return smd[s.ref_value].name if f == "ref_value" else getattr(s, f)


# ---------------------------------------------------------------- HLO module of the step function
meta = P["/host:metadata"]
hlo = None
for m in meta.event_metadata.values():
    if "_steps_fn" in m.name:
        for s in m.stats:
            if meta.stat_metadata[s.metadata_id].name == "Hlo Proto":
                hlo = hlo_pb2.HloProto()
                hlo.ParseFromString(s.bytes_value)
mod = hlo.hlo_module
comps = {c.id: c for c in mod.computations}


def fp_comp(c):
    ids = {i.id: n for n, i in enumerate(c.instructions)}
    parts = []
    for i in c.instructions:
        parts.append(
            (
                i.opcode,
                i.shape.SerializeToString(deterministic=True),
                tuple(i.dimensions),
                i.literal.SerializeToString(deterministic=True),
                tuple(ids.get(o, -1) for o in i.operand_ids),
                i.comparison_direction,
                i.parameter_number,
                tuple((d.start, d.limit, d.stride) for d in i.slice_dimensions),
                tuple(fp_comp(comps[x]) for x in i.called_computation_ids),
            )
        )
    return hashlib.md5(repr(parts).encode()).hexdigest()


fcache = {}
inst_by_kname = {}
groups = collections.defaultdict(list)
info = {}
for c in mod.computations:
    for i in c.instructions:
        if i.opcode in ("fusion", "custom-call", "copy", "gather", "scatter", "reduce", "sort"):
            k = i.name.replace(".", "_").replace("-", "_")
            inst_by_kname[k] = i
            if i.opcode == "fusion":
                cid = i.called_computation_ids[0]
                if cid not in fcache:
                    fcache[cid] = fp_comp(comps[cid])
                ops = collections.Counter(x.opcode for x in comps[cid].instructions)

                def allops(cid, acc):
                    for x in comps[cid].instructions:
                        acc[x.opcode] += 1
                        for y in x.called_computation_ids:
                            allops(y, acc)
                    return acc

                ops = allops(cid, collections.Counter())
                key = (fcache[cid], i.fusion_kind, i.backend_config)
            else:
                ops = collections.Counter([i.opcode])
                key = (i.name,)
            groups[key].append(i)
            info[i.name] = (key, ops)

# ---------------------------------------------------------------- GPU events
lines = {line.name: line for line in gpu.lines}
rows = []  # (start_ps, dur_ps, kernel, graph_launch_corr, stream)
for line in gpu.lines:
    for e in line.events:
        st = {sm[s.metadata_id].name: sv(s, sm) for s in e.stats}
        if st.get("hlo_module") != "jit__steps_fn":
            continue
        rows.append(
            (
                line.timestamp_ns * 1000 + e.offset_ps,
                e.duration_ps,
                em[e.metadata_id].name,
                st.get("correlation_id"),
                st.get("cuda_graph_id"),
                line.name,
            )
        )
rows.sort()


def union(rs):
    busy = 0
    cs = ce = None
    gaps = []
    for s, d, *_ in rs:
        e = s + d
        if ce is None:
            cs, ce = s, e
        elif s > ce:
            busy += ce - cs
            gaps.append(s - ce)
            cs, ce = s, e
        else:
            ce = max(ce, e)
    busy += ce - cs
    return busy, gaps


def ms(ps):
    return ps / 1e9


tot_sum = sum(r[1] for r in rows)
busy, gaps = union(rows)
span = rows[-1][0] + rows[-1][1] - rows[0][0]
print(f"===== {label}: {path}")
print(
    f"steps-fn kernels on GPU: {len(rows)} ({len(rows) / STEPS:.1f}/step); streams: {collections.Counter(r[5] for r in rows)}"
)
print(
    f"span first->last kernel {ms(span):.2f} ms ({ms(span) / STEPS:.3f}/step); sum of kernel durations {ms(tot_sum):.2f} ms "
    f"({ms(tot_sum) / STEPS:.3f}/step); union busy {ms(busy):.2f} ms ({ms(busy) / STEPS:.3f}/step)"
)
big = [g for g in gaps if g > 1e8]
print(
    f"idle gaps: total {ms(sum(gaps)):.2f} ms in {len(gaps)} gaps; median gap {statistics.median(gaps) / 1e6:.2f} us; "
    f"gaps>100us: {len(big)} totalling {ms(sum(big)):.2f} ms; gaps<=100us total {ms(sum(gaps) - sum(big)):.2f} ms"
)
# per graph launch (one per step)
by = collections.defaultdict(list)
for r in rows:
    if r[4] is not None:
        by[r[3]].append(r)
launches = sorted(by.values(), key=lambda v: v[0][0])
print("graph launches:", len(launches))
spans = []
for v in launches:
    b, g = union(v)
    s = v[0][0]
    e = max(x[0] + x[1] for x in v)
    spans.append(e - s)
    print(
        f"  launch @{ms(s - rows[0][0]):8.2f} ms: {len(v)} kernels, span {ms(e - s):.3f} ms, union busy {ms(b):.3f}, "
        f"sum {ms(sum(x[1] for x in v)):.3f}, internal gaps {ms(sum(g)):.3f} ms (>100us: {ms(sum(x for x in g if x > 1e8)):.3f})"
    )
print(f"  steady-state step (median launch span) {ms(statistics.median(spans)):.3f} ms")
# between launches
for a, b in zip(launches, launches[1:]):
    ea = max(x[0] + x[1] for x in a)
    if b[0][0] - ea > 5e7:
        print(f"  gap between launches {ms(b[0][0] - ea):.3f} ms")

# ---------------------------------------------------------------- host side
host = P["/host:CPU"]
for line in host.lines:
    for e in line.events:
        n = host.event_metadata[e.metadata_id].name
        if (
            n.startswith("PjitFunction(_steps_fn)")
            or n.startswith("[iter=")
            or n.startswith("command_buffer::update")
            or n.startswith("cuGraphLaunch (CudaGraph")
            or n == "while"
        ):
            t = line.timestamp_ns * 1000 + e.offset_ps - rows[0][0]
            if n.startswith("[iter=") and n not in ("[iter=0]", "[iter=1]", "[iter=9]"):
                continue
            if n.startswith("cuGraphLaunch") and e.duration_ps < 1e9:
                continue
            print(
                f"  host {n:34s} start {ms(t):8.2f} ms (rel. first GPU kernel)  dur {ms(e.duration_ps):7.2f} ms"
            )
host_cgl = [
    e.duration_ps
    for line in host.lines
    for e in line.events
    if host.event_metadata[e.metadata_id].name.startswith("cuGraphLaunch (CudaGraph")
    and e.duration_ps > 1e9
]
if host_cgl:
    print(
        f"  host cuGraphLaunch of the step graph: median {ms(statistics.median(host_cgl)):.2f} ms per launch"
    )

# ---------------------------------------------------------------- per kernel
kern = collections.defaultdict(lambda: [0, 0])
for r in rows:
    kern[r[2]][0] += 1
    kern[r[2]][1] += r[1]
GEMM_RE = re.compile(r"gemm|cutlass|xmma|nvjet|cublas|triton_dot|matmul", re.I)
VOCAB = {30522, 30528}
byid = {i.id: i for c in mod.computations for i in c.instructions}


def dims_of(inst):
    out = []

    def walk(s):
        if s.tuple_shapes:
            for t in s.tuple_shapes:
                walk(t)
        else:
            out.append((s.element_type, tuple(s.dimensions)))

    walk(inst.shape)
    for o in inst.operand_ids:
        if o in byid:
            walk(byid[o].shape)
    return out


def categorize(kname, inst, ops):
    opn = inst.metadata.op_name if inst is not None else ""
    tail = opn.split("eval_jaxpr/")[-1]
    shapes = dims_of(inst) if inst is not None else []
    alld = {d for _, s in shapes for d in s}
    if GEMM_RE.search(kname) or (
        inst is not None and (inst.opcode == "custom-call" or ops.get("dot"))
    ):
        f32 = re.search(r"f32f32|s1688|tf32", kname) or any(et == 11 for et, s in shapes[1:3])
        return (
            "GEMM f32/tf32 (generator vocab projection)"
            if (alld & VOCAB or f32)
            else "GEMM bf16 (encoder etc.)"
        )
    if kname.startswith(("memcpy", "Memcpy", "Memset", "memset")):
        return "copy/transpose/pad/memset"
    if "adam" in opn.lower():
        return "optimizer: AdamW per-variable update"
    if tail in ("reduce_sum", "sqrt") or (
        tail == ""
        and inst is not None
        and all(len(s) <= 2 and 30522 not in s for _, s in shapes)
        and ops.get("reduce")
    ):
        return "optimizer: global-norm (sum of squares)"
    if ops.get("gather") or ops.get("scatter") or ops.get("dynamic-update-slice"):
        return "embedding gather / scatter-add"
    if alld & VOCAB:
        return "vocab softmax/loss/gumbel-sampling (non-GEMM)"
    if ops.get("xor", 0) >= 4 or ops.get("rng-bit-generator"):
        return "RNG: dropout masks (threefry)"
    if any(len(s) == 4 and s[-1] == s[-2] for _, s in shapes) or any(
        len(s) == 3 and s[0] % 128 == 0 and s[1] == s[2] == 128 and "attention" in opn
        for _, s in shapes
    ):
        return "attention softmax+dropout (non-GEMM)"
    if (
        "layer_norm" in opn.lower()
        or "layernorm" in opn.lower()
        or ops.get("rsqrt")
        or (ops.get("reduce") and any(et == 11 and len(s) == 3 and s[-1] == 1 for et, s in shapes))
    ):
        return "layer norm fwd/bwd (+fused residual/dropout)"
    if "/intermediate/" in opn or (
        ops.get("abs") and ops.get("exponential") and ops.get("multiply", 0) >= 8
    ):
        return "FFN GELU fwd/bwd (+bias grad)"
    if kname.startswith(
        ("copy", "loop_transpose", "input_transpose", "transpose", "loop_pad", "loop_concatenate")
    ) or (
        inst is not None
        and set(ops)
        <= {"parameter", "transpose", "bitcast", "copy", "convert", "tuple", "constant", "pad"}
    ):
        return "copy/transpose/pad/memset"
    if ops.get("reduce"):
        return "other reductions (bias grads etc.)"
    return "other elementwise (casts, residual adds, dropout apply)"


# GEMM FLOPs per step from the while body (every dot in the body runs once per step)
body = max((c for c in mod.computations), key=lambda c: len(c.instructions))


def prod(x):
    r = 1
    for v in x:
        r *= v
    return r


gemm_flops = collections.Counter()
for i in body.instructions:
    dots = []
    if i.opcode == "custom-call" and "gemm_backend_config" in i.backend_config.decode():
        dd = json.loads(i.backend_config)["gemm_backend_config"]["dot_dimension_numbers"]
        lhs = byid[i.operand_ids[0]]
        cdims = [int(x) for x in dd["lhs_contracting_dimensions"]]
        out = i.shape.tuple_shapes[0] if i.shape.tuple_shapes else i.shape
        dots.append((lhs, cdims, out))
    elif i.opcode == "fusion":
        for x in comps[i.called_computation_ids[0]].instructions:
            if x.opcode == "dot":
                dots.append(
                    (
                        byid[x.operand_ids[0]],
                        list(x.dot_dimension_numbers.lhs_contracting_dimensions),
                        x.shape,
                    )
                )
    for lhs, cd, out in dots:
        f = 2 * prod(out.dimensions) * prod(lhs.shape.dimensions[d] for d in cd)
        key = "f32" if lhs.shape.element_type == 11 else "bf16"
        gemm_flops[key] += f
extra = collections.defaultdict(lambda: [0, 0])
cat_t = collections.Counter()
cat_n = collections.Counter()
opname_t = collections.Counter()
detail = []
for k, (n, t) in kern.items():
    inst = inst_by_kname.get(k)
    if inst is not None and inst.name in info:
        key, ops = info[inst.name]
        members = groups[key]
    else:
        members = [inst] if inst is not None else [None]
        ops = collections.Counter()
    # split evenly over fusions sharing the kernel (identical shapes => same cost)
    for mi in members:
        mops = info[mi.name][1] if mi is not None and mi.name in info else ops
        c = categorize(k, mi, mops)
        cat_t[c] += t / len(members)
        cat_n[c] += n / len(members)
        on = mi.metadata.op_name if mi is not None else k
        on = re.sub(r"layer_\d+", "layer_N", on)
        opname_t[(c, on)] += t / len(members)
        if mi is not None:
            sh = dims_of(mi)
            alld = {d for _, s in sh for d in s}
            if (
                alld & VOCAB
                or "generator_predictions" in mi.metadata.op_name
                or "jvp()/reduce" in mi.metadata.op_name
            ):
                extra["vocab-related incl. GEMMs/pads"][0] += t / len(members)
                extra["vocab-related incl. GEMMs/pads"][1] += n / len(members)
            if (
                mi.opcode == "fusion"
                and set(mops)
                <= {"parameter", "convert", "bitcast", "tuple", "broadcast", "copy", "transpose"}
                and mops.get("convert")
            ):
                extra["pure dtype casts (convert-only fusions)"][0] += t / len(members)
                extra["pure dtype casts (convert-only fusions)"][1] += n / len(members)
        elif re.search(r"f32f32|s1688|tf32", k):
            extra["vocab-related incl. GEMMs/pads"][0] += t
            extra["vocab-related incl. GEMMs/pads"][1] += n
    detail.append(
        (
            t,
            n,
            k,
            len(members),
            members[0].metadata.op_name if members[0] is not None else "",
            categorize(k, members[0], ops),
        )
    )
detail.sort(reverse=True)
T = sum(kern[k][1] for k in kern)
print(
    f"\nTop 25 kernels (per step; {len(kern)} distinct kernels): ms/step  %  n/step  mean_us  fusions-sharing  category  kernel  | op_name of first fusion"
)
for t, n, k, nm, on, c in detail[:25]:
    print(
        f"  {ms(t) / STEPS:6.3f} {100 * t / T:5.1f}% {n / STEPS:6.1f} {t / n / 1e6:8.2f} {nm:4d}  {c[:22]:22s} {k[:60]:60s} | {on[-110:]}"
    )
if os.environ.get("MD"):
    print(
        "\n| # | ms/step | % | n/step | mean us | category | kernel | HLO op_name (first fusion using the kernel) |\n|---|---|---|---|---|---|---|---|"
    )
    for j, (t, n, k, nm, on, c) in enumerate(detail[:25], 1):
        on = (
            on.replace("jit(_steps_fn)/while/body/eval_jaxpr/", "")
            .replace("transpose(jvp(", "bwd(")
            .replace("jvp(", "fwd(")
        )
        print(
            f"| {j} | {ms(t) / STEPS:.3f} | {100 * t / T:.1f} | {n / STEPS:.0f} | {t / n / 1e6:.1f} | {c.split(' (')[0]} | {k[:44]} | {on[-70:] or '(cuBLAS)'} |"
        )
print("\nCategories (kernel time, per step; % of summed kernel time):")
for c, t in cat_t.most_common():
    print(
        f"  {c:38s} {ms(t) / STEPS:7.3f} ms  {100 * t / T:5.1f}%   {cat_n[c] / STEPS:7.1f} kernels/step  mean {t / cat_n[c] / 1e6:6.2f} us"
    )
print(f"  {'TOTAL':38s} {ms(T) / STEPS:7.3f} ms")
gt = sum(t for c, t in cat_t.items() if c.startswith("GEMM"))
gf = sum(gemm_flops.values())
print(
    f"GEMM FLOPs per step (dots in loop body): {gf / 1e12:.3f} TFLOP  {dict((k, round(v / 1e12, 3)) for k, v in gemm_flops.items())}"
)
print(
    f"GEMM kernel time {ms(gt) / STEPS:.3f} ms/step -> achieved {gf * STEPS / (gt / 1e12) / 1e12:.1f} TFLOP/s while in GEMMs; "
    f"over steady-state step {gf / (statistics.median(spans) / 1e12) / 1e12:.1f} TFLOP/s"
)
for c in sorted(cat_t):
    if c.startswith("GEMM"):
        k = "f32" if "vocab" in c else "bf16"
        print(
            f"   {c}: {ms(cat_t[c]) / STEPS:.3f} ms, {gemm_flops.get(k, 0) / 1e12:.3f} TFLOP ({k}) -> {gemm_flops.get(k, 0) * STEPS / (cat_t[c] / 1e12) / 1e12:.1f} TFLOP/s"
        )
for c, (t, n) in extra.items():
    print(
        f"  [cross-cut] {c:38s} {ms(t) / STEPS:7.3f} ms  {100 * t / T:5.1f}%   {n / STEPS:7.1f} kernels/step"
    )
# size histogram
durs = [r[1] / 1e6 for r in rows]
print(
    f"  kernel duration median {statistics.median(durs):.2f} us, mean {statistics.mean(durs):.2f} us"
)
for lo, hi in ((0, 2), (2, 5), (5, 10), (10, 50), (50, 1e9)):
    sel = [d for d in durs if lo <= d < hi]
    print(
        f"  kernels {lo:>4}-{hi if hi < 1e9 else 'inf':>4} us: {len(sel) / STEPS:7.1f}/step, {sum(sel) / 1e3 / STEPS:6.3f} ms/step"
    )
if os.environ.get("OPNAMES"):
    print("\nTop op_names (layer index folded):")
    for (c, on), t in opname_t.most_common(int(os.environ["OPNAMES"])):
        print(f"  {ms(t) / STEPS:6.3f} ms  {c[:20]:20s} {on[-140:]}")
# group-size check
bad = [
    (k, n / STEPS, len(groups[info[inst_by_kname[k].name][0]]))
    for k, (n, t) in kern.items()
    if k in inst_by_kname
    and inst_by_kname[k].name in info
    and abs(n / STEPS - len(groups[info[inst_by_kname[k].name][0]])) > 0.01
]
print(
    f"\nfingerprint check: {len(bad)} kernels whose launches/step != #fusions sharing it; time in them "
    f"{ms(sum(kern[k][1] for k, _, _ in bad)) / STEPS:.3f} ms/step; e.g. {bad[:8]}"
)
