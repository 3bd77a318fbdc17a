#!/usr/bin/env python3
"""Where a test run's time went, from the JUnit report cargo-nextest wrote.

    scripts/slowest-tests.py [-n N] [--markdown] REPORT.xml...

Prints, for each test binary, its number of tests, the wall time from its first test's start to
its last test's end (the binaries of one run overlap) and the sum of its tests' times; then the
N (default 20) slowest tests of all the reports together, slowest first. With --markdown, both
as the Markdown tables docs/BENCHMARKS.md keeps. A retried test counts with its last run.
"""

import argparse
import sys
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta


class Case:
    """One test case of a report."""

    def __init__(self, element):
        self.binary = element.get("classname", "")
        self.name = element.get("name", "")
        self.seconds = float(element.get("time", "0"))
        self.start = datetime.fromisoformat(element.get("timestamp"))
        if element.find("failure") is not None or element.find("error") is not None:
            self.outcome = "failed"
        elif element.find("skipped") is not None:
            self.outcome = "skipped"
        else:
            self.outcome = "passed"

    @property
    def end(self):
        return self.start + timedelta(seconds=self.seconds)


def binaries(cases):
    """(binary, tests, wall seconds, summed seconds) of each binary, in the order first seen."""
    by_binary = {}
    for case in cases:
        by_binary.setdefault(case.binary, []).append(case)
    for binary, of_binary in by_binary.items():
        wall = max(c.end for c in of_binary) - min(c.start for c in of_binary)
        summed = sum(c.seconds for c in of_binary)
        yield binary, len(of_binary), wall.total_seconds(), summed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20, help="how many tests (default 20)")
    parser.add_argument("--markdown", action="store_true", help="Markdown tables")
    parser.add_argument("reports", nargs="+", help="JUnit XML files from nextest")
    args = parser.parse_args()

    cases = [Case(e) for path in args.reports for e in ET.parse(path).getroot().iter("testcase")]
    slowest = sorted(cases, key=lambda case: case.seconds, reverse=True)[: args.n]
    mark = lambda case: "" if case.outcome == "passed" else f" ({case.outcome})"
    if args.markdown:
        print("| test binary | tests | wall time, first start to last end | sum of its tests' times |")
        print("|---|---:|---:|---:|")
        for binary, count, wall, summed in binaries(cases):
            print(f"| {binary} | {count} | {wall:.0f} s | {summed:.0f} s |")
        print()
        print("| test | binary | seconds |")
        print("|---|---|---:|")
        for case in slowest:
            print(f"| `{case.name}`{mark(case)} | {case.binary} | {case.seconds:.1f} |")
    else:
        print("Test binaries: tests, wall time (first start to last end), sum of the tests' times")
        for binary, count, wall, summed in binaries(cases):
            print(f"  {binary:24} {count:4} tests {wall:7.0f} s wall {summed:7.0f} s summed")
        print(f"The {len(slowest)} slowest of {len(cases)} tests:")
        for case in slowest:
            print(f"  {case.seconds:7.1f} s  {case.binary}  {case.name}{mark(case)}")


if __name__ == "__main__":
    sys.exit(main())
