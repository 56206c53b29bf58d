"""A pytest plugin that prints TAP (one "ok N - name" line per test, a
"# SKIP reason" for skips, the failure as "#" lines), so that meson counts
the Python tests with the C ones.  Used as: pytest -p no:terminal -p tap_plugin."""
import sys

_count = 0


def _emit(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def pytest_runtest_logreport(report):
    global _count
    name = report.nodeid.split("::", 1)[-1]
    if report.when == "call" or (report.when == "setup" and not report.passed):
        _count += 1
        if report.skipped:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            _emit("ok %d - %s # SKIP %s" % (_count, name, reason.replace("Skipped: ", "")))
        elif report.passed:
            _emit("ok %d - %s" % (_count, name))
        else:
            _emit("not ok %d - %s" % (_count, name))
            for line in str(report.longrepr).splitlines():
                _emit("# " + line)
    elif report.when == "teardown" and report.failed:
        _count += 1
        _emit("not ok %d - %s (teardown)" % (_count, name))
        for line in str(report.longrepr).splitlines():
            _emit("# " + line)


def pytest_collectreport(report):
    global _count
    if report.failed:
        _count += 1
        _emit("not ok %d - collecting %s" % (_count, report.nodeid))
        for line in str(report.longrepr).splitlines():
            _emit("# " + line)


def pytest_sessionfinish(session, exitstatus):
    _emit("1..%d" % _count)
