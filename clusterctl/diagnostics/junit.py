"""JUnit XML of a check (`--junit FILE` of `check health`, `check pairs`, `check topology`), for CI systems
that read it: one testcase per node and one per finding, a failure carrying the finding and its action.
Pure: verdicts and findings in, the document's text out.

A node's testcase fails when the check failed it; a finding's fails when it is an error (a warning's
testcase passes and says it in ``system-out``; info is left out). Every text goes through ``xml_text``
first: a control character read from a node, or a character XML 1.0 does not allow (U+FFFE, U+FFFF, a
lone surrogate), would make the XML unreadable.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from clusterctl.findings import Finding
from clusterctl.terminal import safe_text

# What XML 1.0 allows (its Char production), after safe_text has shown every control: tab, newline and
# the rest of the BMP but surrogates and U+FFFE/U+FFFF, and the planes above.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """``text`` for an XML document: controls as ``\\xNN`` (``safe_text``), any other character XML 1.0
    does not allow as ``\\uNNNN``."""
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", safe_text(text))


@dataclass(frozen=True)
class Case:
    """One testcase: its name, its class (``clusterctl.<check>``), the failure's one line (None: it
    passed), and the text under it (the failure's body, or ``system-out`` when it passed)."""

    name: str
    classname: str
    failure: str | None = None
    details: str = ""


def check_cases(
    check: str, failed_nodes: Mapping[str, str | None], findings: Iterable[Finding]
) -> list[Case]:
    """The testcases of a check: one per node (``failed_nodes``: node -> why it failed, None: it passed),
    then one per error or warning finding, named ``<node> <code>`` (a cluster-wide one's node is
    ``(cluster)``; a repeated name gets `` #2``, `` #3``...)."""
    classname = f"clusterctl.{check}"
    cases = [Case(node, classname, why, why or "") for node, why in failed_nodes.items()]
    seen: dict[str, int] = {}
    for f in findings:
        if f.severity == "info":
            continue
        body = f"{f.severity}: {f.message}" + (f"\naction: {f.advice}" if f.advice else "")
        failure = f"{f.code}: {f.message}" if f.severity == "error" else None
        name = f"{f.node or '(cluster)'} {f.code}"
        seen[name] = seen.get(name, 0) + 1  # a second finding of a code on a node (another port): #2
        cases.append(Case(name + (f" #{seen[name]}" if seen[name] > 1 else ""), classname, failure, body))
    return cases


def junit_xml(suite: str, cases: Sequence[Case]) -> str:
    """The JUnit XML document of ``cases`` in one testsuite named ``suite``."""
    failures = sum(case.failure is not None for case in cases)
    suite = xml_text(suite)
    root = ET.Element("testsuites", name="clusterctl", tests=str(len(cases)), failures=str(failures))
    element = ET.SubElement(
        root, "testsuite", name=suite, tests=str(len(cases)), failures=str(failures), errors="0"
    )
    for case in cases:
        testcase = ET.SubElement(
            element, "testcase", name=xml_text(case.name), classname=xml_text(case.classname)
        )
        if case.failure is not None:
            failure = ET.SubElement(testcase, "failure", message=xml_text(case.failure), type="failure")
            failure.text = xml_text(case.details)
        elif case.details:
            ET.SubElement(testcase, "system-out").text = xml_text(case.details)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
