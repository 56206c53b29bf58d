#!/usr/bin/env python3
"""Counts the TAP results of one or more `meson test` runs and prints one
closing line, `N passed, N failed, N skipped`, summed over all of them (the
normal and the sanitizer build).  Every sub-test line of every test program
is counted; a test program that crashed, timed out or printed no TAP plan
counts as one failure (its TAP lines before the crash still count)."""
import json
import os
import re
import sys

TAP_LINE = re.compile(r'^(not ok|ok)\b[^#]*(#\s*(SKIP|TODO)\b.*)?$', re.IGNORECASE)


def count(logfile):
    passed = failed = skipped = 0
    failures = []
    with open(logfile, encoding='utf-8', errors='replace') as f:
        for line in f:
            entry = json.loads(line)
            out = entry.get('stdout', '') or ''
            result = entry.get('result', '')
            tap_seen = False
            for text in out.splitlines():
                m = TAP_LINE.match(text.strip())
                if not m:
                    continue
                tap_seen = True
                directive = (m.group(3) or '').upper()
                if directive == 'SKIP':
                    skipped += 1
                elif m.group(1).lower() == 'ok':
                    passed += 1
                else:
                    failed += 1
                    failures.append(f"{entry['name']}: {text.strip()}")
            broken = result in ('FAIL', 'TIMEOUT', 'ERROR', 'INTERRUPT')
            if broken and not any(f.startswith(entry['name'] + ':') for f in failures):
                failed += 1
                failures.append(f"{entry['name']}: {result}")
            elif not tap_seen and result == 'OK':
                passed += 1
            elif not tap_seen and result == 'SKIP':
                skipped += 1
    return passed, failed, skipped, failures


def main():
    """Usage: count_tests.py [TESTLOG.json ...] — one or more meson test logs
    (e.g. the normal and the sanitizer build); the closing line sums them.
    A log named on the command line that does not exist counts as one failure
    (its build or test run never finished)."""
    logfiles = sys.argv[1:] or ['build/meson-logs/testlog.json']
    passed = failed = skipped = 0
    failures = []
    for logfile in logfiles:
        try:
            p, f, s, fl = count(logfile)
        except OSError as e:
            p, f, s, fl = 0, 1, 0, [f'{logfile}: cannot be read ({e.strerror})']
        passed, failed, skipped = passed + p, failed + f, skipped + s
        build = os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(logfile))))
        prefix = f'[{build}] ' if len(logfiles) > 1 else ''
        failures += [prefix + x for x in fl]
    for f in failures[:50]:
        print('FAILED', f)
    print(f'{passed} passed, {failed} failed, {skipped} skipped')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
