#!/usr/bin/env python3
"""Markdown tables for docs/performance.md from saved benchmark output.

    python3 bench/perf_tables.py kernel DEFAULT.txt HASWELL.txt   # kernel_bench, both OpenBLAS core types
    python3 bench/perf_tables.py gemm DEFAULT.txt HASWELL.txt     # gemm_bench, both OpenBLAS core types

Nothing is computed here that the benchmarks did not print; this only lays their lines side by side.
"""
import re
import sys

VARIANTS = ["cpu_generic", "cpu_avx2", "cpu_avx512"]


def parse_kernel(path):
    """{(op, dtype, variant): {key: value}} and the peak line of one kernel_bench run."""
    results, peak = {}, {}
    for line in open(path):
        if line.startswith("RESULT peak"):
            peak = dict(kv.split("=") for kv in line.split()[2:])
        elif line.startswith("RESULT kernel"):
            fields = line.split()
            op, dtype, variant = fields[2:5]
            values = dict(kv.split("=", 1) for kv in fields[5:] if "=" in kv and not kv.startswith("("))
            scaled = re.search(r"\(ref timed on (\S+) of (\d+), time x(\d+)\)", line)
            values["scaled"] = f"{scaled.group(1)}, x{scaled.group(3)}" if scaled else "full"
            results[(op, dtype, variant)] = values
    return results, peak


def ms(text):
    value = float(text)
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def rate(values):
    if "GFLOP/s" in values:
        return f"{float(values['GFLOP/s']):.0f} GFLOP/s ({float(values['%peak']):.0f}% f32 peak)"
    return f"{float(values['GB/s']):.1f} GB/s"


def kernel_tables(default_path, haswell_path):
    default, default_peak = parse_kernel(default_path)
    haswell, haswell_peak = parse_kernel(haswell_path)
    print("| OPENBLAS_CORETYPE | f32 GEMM 2048^3 (OpenBLAS) | bf16 GEMM 2048^3 (oneDNN) |")
    print("|---|---|---|")
    for name, peak in (("unset (Cooperlake)", default_peak), ("Haswell", haswell_peak)):
        print(f"| {name} | {float(peak['f32_gemm_gflops']):.0f} GFLOP/s | {float(peak['bf16_gemm_gflops']):.0f} GFLOP/s |")
    ops = list(dict.fromkeys(op for op, _, _ in default))
    for dtype in ("f32", "bf16"):
        print(f"\n**{dtype}** (OPENBLAS_CORETYPE unset): time in ms, speed-up over `ref` in brackets\n")
        print("| op | ref ms (timed on) | cpu_generic | cpu_avx2 | cpu_avx512 | cpu_avx512 rate |")
        print("|---|---|---|---|---|---|")
        for op in ops:
            ref = default[(op, dtype, "ref")]
            cells = []
            for variant in VARIANTS:
                v = default.get((op, dtype, variant))
                cells.append(f"{ms(v['time_ms'])} ({float(v['ratio_vs_ref']):.0f}x)" if v else "-")
            best = default[(op, dtype, "cpu_avx512")]
            print(f"| {op} | {ms(ref['time_ms'])} ({ref['scaled']}) | {' | '.join(cells)} | {rate(best)} |")
    print("\n**OpenBLAS core type** (f32 GEMM-backed ops, cpu_avx512 variant; bf16 goes through oneDNN and "
          "is not affected):\n")
    print("| op | unset: ms | unset: GFLOP/s (% peak) | Haswell: ms | Haswell: GFLOP/s (% own peak) | Haswell / unset time |")
    print("|---|---|---|---|---|---|")
    for op in ops:
        if not op.startswith("linear"):
            continue
        d, h = default[(op, "f32", "cpu_avx512")], haswell[(op, "f32", "cpu_avx512")]
        print(f"| {op} | {float(d['time_ms']):.2f} | {float(d['GFLOP/s']):.0f} ({float(d['%peak']):.0f}%) | "
              f"{float(h['time_ms']):.2f} | {float(h['GFLOP/s']):.0f} ({float(h['%peak']):.0f}%) | "
              f"{float(h['time_ms']) / float(d['time_ms']):.2f} |")


def parse_gemm(path):
    """({(pass:shape, dtype): (gflops, pct, layer)}, {dtype: peak}) of one gemm_bench run."""
    rows, peaks, vs_ref = {}, {}, {}
    for line in open(path):
        m = re.match(r"peak \S+ (\w+) ([\d.]+) GFLOP/s", line)
        if m:
            peaks[m.group(1)] = float(m.group(2))
        m = re.match(r"gemm (\S+) (\w+) ([\d.]+) GFLOP/s +(\d+)% of peak +\[(\w+)\]", line)
        if m:
            rows[(m.group(1), m.group(2))] = (float(m.group(3)), int(m.group(4)), m.group(5))
        m = re.match(r"gemm_vs_ref (\S+) (\w+) .* speed-up (\d+)x", line)
        if m:
            vs_ref[m.group(2)] = (m.group(1), int(m.group(3)))
    return rows, peaks, vs_ref


def gemm_tables(default_path, haswell_path):
    default, default_peaks, default_vs_ref = parse_gemm(default_path)
    haswell, haswell_peaks, _ = parse_gemm(haswell_path)
    print("| layer | pass (M x N x K) | f32, unset: GFLOP/s (% peak) | f32, Haswell: GFLOP/s (% peak) | "
          "bf16 (oneDNN): GFLOP/s (% bf16 peak) |")
    print("|---|---|---|---|---|")
    for key in dict.fromkeys(k for k, _ in default):
        d, h, b = default[(key, "f32")], haswell[(key, "f32")], default[(key, "bf16")]
        print(f"| {d[2]} | {key} | {d[0]:.0f} ({d[1]}%) | {h[0]:.0f} ({h[1]}%) | {b[0]:.0f} ({b[1]}%) |")
    print(f"| **peak** | 2048x2048x2048 | {default_peaks['f32']:.0f} | {haswell_peaks['f32']:.0f} | "
          f"{default_peaks['bf16']:.0f} |")
    for dtype, (shape, speedup) in default_vs_ref.items():
        print(f"\nfast vs ref GEMM {shape} {dtype}: {speedup}x")


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("kernel", "gemm"):
        sys.exit(__doc__)
    (kernel_tables if sys.argv[1] == "kernel" else gemm_tables)(sys.argv[2], sys.argv[3])
