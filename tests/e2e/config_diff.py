"""Asserts that two resolved configs (`rlforge train --check-config` output) have the same keys and differ
exactly where expected, for the ROLL e2e tests: a ROLL example against the verl example it mirrors.
Usage: config_diff.py VERL.yaml ROLL.yaml EXPECTED.json, EXPECTED an object {dotted key: [verl, roll]}."""
import json
import sys


def leaves(path):
    """The resolved config's leaves by dotted key (yaml-cpp's block output: two spaces per level)."""
    out, stack = {}, []
    for line in open(path):
        if not line.strip():
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2
        key, _, value = line.strip().partition(":")
        stack[depth:] = [key]
        if value.strip():
            out[".".join(stack)] = value.strip()
    return out


verl, roll = leaves(sys.argv[1]), leaves(sys.argv[2])
expected = {k: tuple(v) for k, v in json.load(open(sys.argv[3])).items()}
assert set(verl) == set(roll), f"keys only in one: {sorted(set(verl) ^ set(roll))}"
differ = {k: (verl[k], roll[k]) for k in verl if verl[k] != roll[k]}
assert differ == expected, "differences other than the expected ones: " + str(
    {k: v for k, v in differ.items() if expected.get(k) != v} | {k: "equal" for k in expected if k not in differ})
print(f"ok: {len(verl)} verl keys, equal but for {len(expected)} ROLL spells differently")
