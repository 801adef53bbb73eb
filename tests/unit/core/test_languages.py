"""The language table: SandboxFusion's names, one image per family, allowlisted, built."""

from __future__ import annotations

import pytest

from core import defaults
from core.languages import (
    LANGUAGES,
    UNAVAILABLE,
    UnknownLanguage,
    language,
    names,
    source_for,
)
from proctor.imagebuild.builder import DEFAULT_TARGETS, IMAGES, LANGUAGE_IMAGES
from proctor.models import LANGUAGE_NAMES, TaskSpec, TestSpec

# what verl, SkyRL, ROLL and SandboxFusion's own MAJOR_RUNNERS send for these languages
SANDBOXFUSION_NAMES = {
    "python",
    "pytest",
    "cpp",
    "go",
    "go_test",
    "java",
    "junit",
    "nodejs",
    "js",
    "ts",
    "typescript",
    "rust",
    "bash",
}


def test_the_names_trainers_send_are_known() -> None:
    assert SANDBOXFUSION_NAMES | {"c", "javascript"} <= set(names())
    assert set(names()) == LANGUAGE_NAMES  # the wire contract refuses the others
    assert language("javascript") is language("nodejs") is language("js")
    assert language("ts") is language("typescript")


def test_compiled_languages_compile_and_interpreted_ones_do_not() -> None:
    compiled = {name for name, lang in LANGUAGES.items() if lang.compiled}
    # SandboxFusion's split: its C#, Kotlin and jest build in the run, TypeScript runs under
    # tsx with no compile step
    assert compiled == {
        *("cpp", "c", "java", "junit", "go", "go_test", "rust"),
        *("scala", "verilog", "D_ut"),
    }
    for lang in LANGUAGES.values():
        # the compile step leaves what the run command starts in the workspace
        if lang.compiled and lang.run.startswith("./"):
            assert lang.run.split()[0][2:] in (lang.compile or "")


def test_every_image_a_language_needs_is_allowlisted_and_built() -> None:
    built = {image for target, image in IMAGES.items() if target in DEFAULT_TARGETS}
    for lang in LANGUAGES.values():
        reference = defaults.IMAGES[lang.image]
        assert reference in built, (lang.name, reference)
    assert {image for image, _ in LANGUAGE_IMAGES.values()} == {
        ref for name, ref in defaults.LANGUAGE_IMAGES.items()
    }


def test_every_language_sandboxfusion_names_runs_or_says_why_not() -> None:
    # SandboxFusion's `Language` literal (sandbox/runners/types.py)
    sandboxfusion = {
        *("python", "cpp", "nodejs", "go", "go_test", "java", "php", "csharp", "bash"),
        *("typescript", "sql", "rust", "cuda", "lua", "R", "perl", "D_ut", "ruby", "scala"),
        *("julia", "pytest", "junit", "kotlin_script", "jest", "verilog", "python_gpu"),
        *("lean", "swift", "racket"),
    }
    assert sandboxfusion <= set(names()) | set(UNAVAILABLE)
    assert not set(names()) & set(UNAVAILABLE)
    assert all(UNAVAILABLE.values())


def test_an_unknown_language_names_the_known_ones() -> None:
    with pytest.raises(UnknownLanguage, match=r"'cobol'.*cpp.*python"):
        language("cobol")
    assert issubclass(UnknownLanguage, ValueError)  # pydantic turns it into a 422


def test_a_junit_class_goes_to_the_file_of_its_name() -> None:
    junit = language("junit")
    code = "import org.junit.jupiter.api.Test;\npublic final class AddTest { }\n"
    assert source_for(junit, code) == "AddTest.java"
    assert source_for(junit, "class Hidden {}") == "Main.java"
    assert source_for(language("java"), code) == "Main.java"  # java's class is always Main


def test_a_task_in_an_unknown_language_is_refused_at_the_edge() -> None:
    with pytest.raises(ValueError, match="'cobol' is not supported"):
        TaskSpec(language="cobol", tests=TestSpec())
    assert TaskSpec(language="cpp", tests=TestSpec()).language == "cpp"
