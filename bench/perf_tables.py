#!/usr/bin/env python3
"""Markdown tables for docs/performance.md from saved benchmark output.

    python3 bench/perf_tables.py kernel --unset kernel_default_*.txt --haswell kernel_haswell_*.txt
    python3 bench/perf_tables.py gemm --unset gemm_default_*.txt --haswell gemm_haswell_*.txt

The files are saved outputs of kernel_bench / gemm_bench runs with OPENBLAS_CORETYPE unset and with
OPENBLAS_CORETYPE=Haswell. A number in a table is the median over the runs of that number; a ratio is
the median of the ratios, each measured within one run. Nothing is computed that the benchmarks did not
print.
"""
import argparse
import re
import statistics

VARIANTS = ["cpu_generic", "cpu_avx2", "cpu_avx512"]


def median_of(runs):
    """{key: {field: median}} over a list of {key: {field: value}} (fields holding numbers)."""
    merged = {}
    for key in runs[0]:
        fields = {}
        for field, value in runs[0][key].items():
            try:
                fields[field] = statistics.median(float(run[key][field]) for run in runs)
            except ValueError:
                fields[field] = value
        merged[key] = fields
    return merged


def parse_kernel(path):
    """{(op, dtype, variant): {field: value}}, with the peak line under key 'peak'."""
    results = {}
    for line in open(path):
        if line.startswith("RESULT peak"):
            results["peak"] = dict(kv.split("=") for kv in line.split()[2:])
        elif line.startswith("RESULT kernel"):
            fields = line.split()
            op, dtype, variant = fields[2:5]
            values = dict(kv.split("=", 1) for kv in fields[5:] if "=" in kv and not kv.startswith("("))
            scaled = re.search(r"\(ref timed on (\S+) of (\d+), time x(\d+)\)", line)
            values["scaled"] = f"{scaled.group(1)}, x{scaled.group(3)}" if scaled else "full"
            results[(op, dtype, variant)] = values
    return results


def ms(value):
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}" if value >= 1 else f"{value:.2g}"


def rate(values):
    if "GFLOP/s" in values:
        return f"{values['GFLOP/s']:.0f} GFLOP/s ({values['%peak']:.0f}% f32 peak)"
    return f"{values['GB/s']:.1f} GB/s"


def kernel_tables(default_paths, haswell_paths):
    default = median_of([parse_kernel(p) for p in default_paths])
    haswell = median_of([parse_kernel(p) for p in haswell_paths])
    print("| OPENBLAS_CORETYPE | f32 GEMM 2048^3 (OpenBLAS) | bf16 GEMM 2048^3 (oneDNN) |")
    print("|---|---|---|")
    for name, run in (("unset (Cooperlake kernels)", default), ("Haswell", haswell)):
        print(f"| {name} | {run['peak']['f32_gemm_gflops']:.0f} GFLOP/s | {run['peak']['bf16_gemm_gflops']:.0f} GFLOP/s |")
    ops = list(dict.fromkeys(key[0] for key in default if key != "peak"))
    for dtype in ("f32", "bf16"):
        print(f"\n**{dtype}** (OPENBLAS_CORETYPE unset): time in ms, speed-up over `ref` in brackets\n")
        print("| op | ref ms (timed on) | cpu_generic | cpu_avx2 | cpu_avx512 | cpu_avx512 rate |")
        print("|---|---|---|---|---|---|")
        for op in ops:
            ref = default[(op, dtype, "ref")]
            cells = []
            for variant in VARIANTS:
                v = default.get((op, dtype, variant))
                cells.append(f"{ms(v['time_ms'])} ({v['ratio_vs_ref']:.0f}x)" if v else "-")
            best = default[(op, dtype, "cpu_avx512")]
            print(f"| {op} | {ms(ref['time_ms'])} ({ref['scaled']}) | {' | '.join(cells)} | {rate(best)} |")
    print("\n**OpenBLAS core type**, f32 GEMM-backed ops, cpu_avx512 variant (bf16 goes through oneDNN):\n")
    print("| op | unset: ms | unset: GFLOP/s (% peak) | Haswell: ms | Haswell: GFLOP/s (% peak) | Haswell / unset time |")
    print("|---|---|---|---|---|---|")
    for op in ops:
        if not op.startswith("linear"):
            continue
        d, h = default[(op, "f32", "cpu_avx512")], haswell[(op, "f32", "cpu_avx512")]
        print(f"| {op} | {d['time_ms']:.1f} | {d['GFLOP/s']:.0f} ({d['%peak']:.0f}%) | {h['time_ms']:.1f} | "
              f"{h['GFLOP/s']:.0f} ({h['%peak']:.0f}%) | {h['time_ms'] / d['time_ms']:.2f} |")


def parse_gemm(path):
    """{(pass:shape, dtype): {field: value}}, with peaks under ('peak', dtype) and the
    speed-up over ref under ('vs_ref', dtype)."""
    results = {}
    for line in open(path):
        m = re.match(r"peak \S+ (\w+) ([\d.]+) GFLOP/s", line)
        if m:
            results[("peak", m.group(1))] = {"gflops": m.group(2)}
        m = re.match(r"gemm (\S+) (\w+) ([\d.]+) GFLOP/s +(\d+)% of peak +\[(\w+)\]", line)
        if m:
            results[(m.group(1), m.group(2))] = {"gflops": m.group(3), "pct": m.group(4), "layer": m.group(5)}
        m = re.match(r"gemm_vs_ref (\S+) (\w+) .* speed-up (\d+)x", line)
        if m:
            results[("vs_ref", m.group(2))] = {"shape": m.group(1), "speedup": m.group(3)}
    return results


def gemm_tables(default_paths, haswell_paths):
    default = median_of([parse_gemm(p) for p in default_paths])
    haswell = median_of([parse_gemm(p) for p in haswell_paths])
    print("| layer | pass:M x N x K | f32 oneDNN: GFLOP/s (% peak) | f32 OpenBLAS, unset | f32 OpenBLAS, Haswell | "
          "bf16 oneDNN |")
    print("|---|---|---|---|---|---|")
    for key in dict.fromkeys(k for k, _ in default if k not in ("peak", "vs_ref")):
        cells = [default[(key, "f32_onednn")], default[(key, "f32_openblas")], haswell[(key, "f32_openblas")],
                 default[(key, "bf16_onednn")]]
        print(f"| {cells[0]['layer']} | {key} | " + " | ".join(f"{c['gflops']:.0f} ({c['pct']:.0f}%)" for c in cells)
              + " |")
    peaks = [default[("peak", "f32_onednn")], default[("peak", "f32_openblas")], haswell[("peak", "f32_openblas")],
             default[("peak", "bf16_onednn")]]
    print("| **peak** | 2048x2048x2048 | " + " | ".join(f"{p['gflops']:.0f}" for p in peaks) + " |")
    for dtype in ("f32", "bf16"):
        v = default[("vs_ref", dtype)]
        print(f"\nfast vs ref GEMM {v['shape']} {dtype}: {v['speedup']:.0f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bench", choices=["kernel", "gemm"])
    parser.add_argument("--unset", nargs="+", required=True, help="outputs with OPENBLAS_CORETYPE unset")
    parser.add_argument("--haswell", nargs="+", required=True, help="outputs with OPENBLAS_CORETYPE=Haswell")
    args = parser.parse_args()
    (kernel_tables if args.bench == "kernel" else gemm_tables)(args.unset, args.haswell)
