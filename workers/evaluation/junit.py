"""Parse JUnit XML (as pytest writes it with junit_family=xunit1) into test cases.

Test results come from this report, never from the free-form output of the test run.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from proctor.models import TestCase, TestOutcome

MAX_MESSAGE_CHARS = 2000


class ReportError(ValueError):
    """The report is missing or not JUnit XML: the run is a failure, never a pass."""


@dataclass(frozen=True, slots=True)
class Report:
    cases: list[TestCase]
    collection_errors: list[str]

    @property
    def all_passed(self) -> bool:
        return (
            bool(self.cases)
            and all(c.outcome in (TestOutcome.passed, TestOutcome.skipped) for c in self.cases)
            and any(c.outcome is TestOutcome.passed for c in self.cases)
        )


def node_id(case: ET.Element) -> str:
    """pytest's node id (`tests/test_x.py::TestClass::test_name`) from an xunit1 testcase."""
    name = case.get("name", "")
    classname = case.get("classname", "")
    path = case.get("file")
    if path:
        module = path[:-3].replace("/", ".") if path.endswith(".py") else path
        classes = classname[len(module) :].lstrip(".") if classname.startswith(module) else ""
        return "::".join(part for part in (path, *classes.split("."), name) if part)
    return "::".join(part for part in (classname, name) if part)


def parse(xml_text: str | None) -> Report:
    if not xml_text or not xml_text.strip():
        raise ReportError("the test run wrote no JUnit report")
    try:
        root = ET.fromstring(xml_text)
    except (ET.ParseError, RecursionError, ValueError) as exc:  # the code under test may write it
        raise ReportError(f"the JUnit report is not valid XML: {exc}") from exc
    if root.tag not in ("testsuites", "testsuite"):
        raise ReportError(f"not a JUnit report (root element <{root.tag}>)")
    cases: list[TestCase] = []
    collection_errors: list[str] = []
    for element in root.iter("testcase"):
        outcome = TestOutcome.passed
        message: str | None = None
        for child in element:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {
                    "failure": TestOutcome.failed,
                    "error": TestOutcome.error,
                    "skipped": TestOutcome.skipped,
                }[child.tag]
                text = (child.get("message") or "") + "\n" + (child.text or "")
                message = text.strip()[:MAX_MESSAGE_CHARS] or None
                break
        name = node_id(element)
        # pytest reports a module that failed to import as an errored case named after it
        if outcome is TestOutcome.error and not element.get("name") and element.get("classname"):
            collection_errors.append(message or name)
        try:
            duration = float(element.get("time", "0") or 0)
        except ValueError:
            duration = 0.0
        if not math.isfinite(duration) or duration < 0:  # no JSON number: not a duration
            duration = 0.0
        cases.append(TestCase(name=name, outcome=outcome, duration_s=duration, message=message))
    return Report(cases=cases, collection_errors=collection_errors)
