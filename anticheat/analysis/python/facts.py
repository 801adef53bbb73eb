"""What the Python analysis found in one piece of code: the evidence the rules quote."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["PyFacts"]


@dataclass(slots=True)
class PyFacts:
    error: str | None = None
    imports: set[str] = field(default_factory=set)
    exits_at_import: list[str] = field(default_factory=list)
    exits_in_functions: list[str] = field(default_factory=list)
    exit_hooks: list[str] = field(default_factory=list)
    always_equal: list[str] = field(default_factory=list)
    eq_patches: list[str] = field(default_factory=list)  # `__eq__` set after the class body
    outcome_hooks: list[str] = field(default_factory=list)
    collection_changes: list[str] = field(default_factory=list)
    runner_patches: list[str] = field(default_factory=list)
    frame_reads: list[str] = field(default_factory=list)
    # a caller's frame used to read its source, or to patch what its namespace holds
    caller_source: list[str] = field(default_factory=list)
    caller_patches: list[str] = field(default_factory=list)
    heap_scans: list[str] = field(default_factory=list)
    harness_probes: list[str] = field(default_factory=list)
    # a harness probe and frame or heap introspection in one function: it answers
    # differently when the test runner is there
    graded_switches: list[str] = field(default_factory=list)
    locations: list[str] = field(default_factory=list)  # modules whose installed file it finds
    files: list[tuple[str, str | None, str]] = field(default_factory=list)  # kind, path, how
    network: list[tuple[str, list[str], bool, str]] = field(default_factory=list)
    shell: list[tuple[str, bool, str]] = field(default_factory=list)  # text, static, how
    decoded_exec: list[str] = field(default_factory=list)
    big_allocs: list[str] = field(default_factory=list)
    fork_loops: list[str] = field(default_factory=list)
    busy_loops: list[str] = field(default_factory=list)
    trivial_tests: list[str] = field(default_factory=list)
    skips: list[str] = field(default_factory=list)
    raised_skips: list[str] = field(default_factory=list)  # a test framework's skip, raised
    clock_patches: list[str] = field(default_factory=list)  # time.time & co. replaced
    urls: list[str] = field(default_factory=list)  # address-like string constants
    reads_stdin: bool = False
    # a module-level statement that is a call (`main()`, `print(…)`, under a `__main__`
    # guard too): the file does its work when run, it is a program rather than a library
    program: bool = False
    tests_defined: int = 0
