#!/usr/bin/env python3
"""Prints one line for a pytest stage of make check from its JUnit XML:
how many tests ran, passed, failed and were skipped, then each skip reason
with its count, so that a skipped test is never hidden by a summary that
only says 'passed'. Exit status 1 when the report is missing or empty."""

import collections
import sys
import xml.etree.ElementTree as ET


def main(path):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"no test report ({e})")
        return 1
    cases = root.iter("testcase")
    ran = passed = failed = 0
    skips = collections.Counter()
    for c in cases:
        ran += 1
        skip = c.find("skipped")
        if skip is not None:
            skips[skip.get("message", "").strip() or "no reason given"] += 1
        elif c.find("failure") is not None or c.find("error") is not None:
            failed += 1
        else:
            passed += 1
    print(f"{ran} tests: {passed} passed, {failed} failed, {sum(skips.values())} skipped")
    for reason, n in sorted(skips.items()):
        print(f"  skipped {n}: {reason}")
    return 0 if ran else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
