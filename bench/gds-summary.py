"""Medians of bench/device-gds.sh's rounds: gdrprov bench gds beside KvikIO (issue 47).

Usage: python3 bench/gds-summary.py DIR  (DIR holds gdrprov-SIZE-ROUND.json and kvikio.jsonl).
Prints a Markdown table: per size and temperature, each tool's rounds and median (GB/s), and
gdrprov / KvikIO-through-cuFile.
"""
import glob, json, os, statistics, sys

d = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(d, "gdrprov-*.json"))):
    for x in json.load(open(f))["results"]:
        for temp in ("cold", "warm"):
            rows.setdefault((x["bytes"], temp), {}).setdefault("gdrprov", []).append(x[f"read_{temp}_gbs"])
for line in open(os.path.join(d, "kvikio.jsonl")):
    k = json.loads(line)
    if k["label"] in ("cufile", "posix"):
        rows.setdefault((k["bytes"], k["temp"]), {}).setdefault("kvikio-" + k["label"], []).append(k["gbs"])
print("| size | read | gdrprov bench gds | KvikIO through cuFile | KvikIO POSIX | gdrprov / KvikIO-cuFile |")
print("|---|---|---|---|---|---|")
for (size, temp), t in sorted(rows.items()):
    cell = lambda v: ", ".join(f"{x:.2f}" for x in v) + f" (median {statistics.median(v):.2f})" if v else "-"
    g, k, p = t.get("gdrprov", []), t.get("kvikio-cufile", []), t.get("kvikio-posix", [])
    ratio = f"{statistics.median(g) / statistics.median(k):.2f}x" if g and k else "-"
    print(f"| {size >> 30} GiB | {temp} | {cell(g)} | {cell(k)} | {cell(p)} | {ratio} |")
