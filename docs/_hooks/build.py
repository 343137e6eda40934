"""mkdocs hooks: bring the notebooks, benchmark results and a local MathJax into the site.

The site is built from files that live outside ``docs/`` (``notebooks/*.ipynb`` and
``experiments/notebooks/*.ipynb``, the tables and figures under ``benchmarks/results/`` and
``experiments/results/``), so that it always shows what is committed there; the topic pages link to
those figures as ``../benchmarks/results/...`` (``../experiments/results/...``) so that they also
work when read in the repository, and the links are rewritten here. MathJax is
served from the site itself (copied from the ``jupyter-server-mathjax`` package), so the maths
renders with no network. The API links' tooltips name the public path only (autorefs appends the
implementation path, ``cfm_jax.forward (cfm_jax._solve.forward)``; the site never names a private
module).
"""

from __future__ import annotations

import pathlib
import re
import shutil

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = pathlib.Path(__file__).resolve().parents[2]
MATHJAX_DIR = "_mathjax"
#: the library's notebooks and the experiments' (a second distribution in experiments/)
NOTEBOOKS = ("notebooks", "experiments/notebooks")
#: the library's benchmark results and the experiments' committed results
RESULTS = ("benchmarks/results", "experiments/results")


@event_priority(100)  # before mkdocs-jupyter looks for notebooks
def on_files(files: Files, config) -> Files:
    site_dir, urls = config["site_dir"], config["use_directory_urls"]
    for folder in NOTEBOOKS:
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            files.append(File(f"{folder}/{path.name}", str(ROOT), site_dir, urls))
    for folder in RESULTS:
        for path in sorted((ROOT / folder).glob("*.md")):  # the benchmark tables, as pages
            files.append(File(f"{folder}/{path.name}", str(ROOT), site_dir, urls))
        for path in sorted((ROOT / folder).rglob("*.png")):
            files.append(File(path.relative_to(ROOT).as_posix(), str(ROOT), site_dir, urls))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    # ../benchmarks/results/x.png (from docs/) -> benchmarks/results/x.png (in the site); the same for
    # ../experiments/results/
    depth = page.file.src_uri.count("/")
    up = "../" * depth
    return re.sub(r"\]\((?:\.\./)+(benchmarks|experiments)/results/", lambda m: f"]({up}{m[1]}/results/", markdown)


# autorefs' tooltip of a re-exported name: "cfm_jax.X (cfm_jax._module.X)"
_PRIVATE_TITLE = re.compile(r'(title="[^"]*?)\s*\(cfm_jax(?:\.\w+)*\._\w[\w.]*\)"')


def on_post_page(output: str, page, config) -> str:
    return _PRIVATE_TITLE.sub(r'\1"', output)


def on_post_build(config) -> None:
    import jupyter_server_mathjax

    src = pathlib.Path(jupyter_server_mathjax.__file__).parent / "static"
    dst = pathlib.Path(config["site_dir"]) / MATHJAX_DIR
    shutil.copytree(src, dst, dirs_exist_ok=True)
