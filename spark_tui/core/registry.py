"""Where recipes come from: the user's folder, git registries named in spark-tui's config,
the registry clones sparkrun keeps on this machine, and the bundled recipes; and how a
recipe's `mods:` and `pre_exec:` entries are found, as sparkrun finds them.

Name clashes are resolved in this order (the first wins, the others are listed as
shadowed): an explicit path; the user's folder; the registries of spark-tui's config, in
the order the config lists them; sparkrun's clones, in the order of sparkrun's
`registries.yaml`; the bundled recipes. `@REGISTRY/NAME` picks a recipe from one registry.

A registry is a folder (a git clone) with its recipes under a subpath (`recipes/` by
default, searched recursively, since registries nest recipes by model family) and its
mods under another (`mods/`). sparkrun keeps its list in `~/.config/sparkrun/registries.yaml`
and its clones in `~/.cache/sparkrun/registries/<name>/`; spark-tui's own registries are
cloned into the user cache (see `ops.registries`). Only files are read here: no git.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

import platformdirs
import yaml

from spark_tui.core.errors import InputError, RecipeError
from spark_tui.core.plan import is_secret_name
from spark_tui.core.recipe import MissingFile, PrelaunchStep, Recipe
from spark_tui.core.recipe_loader import (
    RECIPE_SUFFIXES,
    bundled_recipes_dir,
    load_recipe_file,
    user_recipes_dir,
)

# The registry sparkrun falls back to for mods (the original home of the shared mods).
EUGR_REGISTRY = "eugr"
CONTAINER_MODS_DIR = "/workspace/mods"
# A mod's exec step, exactly as sparkrun runs it (the folder name is shell-quoted).
MOD_EXEC = "export WORKSPACE_DIR=$PWD && cd {dest} && chmod +x run.sh && ./run.sh"

# Subpaths of the registries sparkrun ships (recipes, mods), for clones found without
# a registries.yaml; any other clone is read as recipes/ and mods/.
SPARKRUN_DEFAULT_LAYOUT: dict[str, tuple[str, str]] = {
    "sparkrun-testing": ("testing/recipes", ""),
    "official": ("official-recipes", ""),
    "eugr": ("recipes", "mods"),
    "sparkrun-transitional": ("transitional/recipes", ""),
    "experimental": ("experimental-recipes", "experimental-mods"),
    "community": ("recipes", ""),
    "atlas": ("recipes", ""),
}
# The registries sparkrun ships hidden: their recipes are found by plain name only in
# spark-tui; sparkrun wants `@REGISTRY/NAME` for them.
SPARKRUN_HIDDEN = frozenset({"sparkrun-testing", "experimental", "community", "atlas"})
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


@dataclass(frozen=True)
class Registry:
    """One registry on disk: its name, clone folder, recipe and mod subpaths.

    `kind` is "registry" (named in spark-tui's config) or "sparkrun" (sparkrun's clone).
    An empty `mods_subpath` means the registry serves no mods.
    """

    name: str
    kind: str
    root: Path
    subpath: str = "recipes"
    mods_subpath: str = "mods"
    url: str = ""
    ref: str | None = None
    # sparkrun's `visible: false`: its recipes are left out of sparkrun's plain-name lookups.
    visible: bool = True

    @property
    def recipes_dir(self) -> Path:
        return self.root if self.subpath in ("", "/", ".") else self.root / self.subpath

    @property
    def mods_dir(self) -> Path | None:
        if not self.mods_subpath:
            return None
        return self.root if self.mods_subpath in ("/", ".") else self.root / self.mods_subpath


@dataclass
class Sources:
    """Every place recipes are read from, in priority order (see the module doc)."""

    user_dir: Path | None = None
    registries: list[Registry] = field(default_factory=list)
    sparkrun: list[Registry] = field(default_factory=list)
    bundled_dir: Path | None = None

    def all_registries(self) -> list[Registry]:
        return [*self.registries, *self.sparkrun]

    def registry(self, name: str) -> Registry | None:
        """A registry by name: spark-tui's own before sparkrun's of the same name."""
        return next((r for r in self.all_registries() if r.name == name), None)


# --- where things live ---------------------------------------------------------------


def config_path() -> Path:
    """spark-tui's config file (its `registries:` list is read here)."""
    return Path(platformdirs.user_config_dir("spark-tui")) / "config.yaml"


def registry_cache_dir() -> Path:
    """Where spark-tui clones the registries its config names: `<name>/` each."""
    return Path(platformdirs.user_cache_dir("spark-tui")) / "registries"


def _sparkrun_home() -> Path:
    # sparkrun's folders sit under the home; SPARK_TUI_SPARKRUN_HOME reads another user's.
    override = os.environ.get("SPARK_TUI_SPARKRUN_HOME")
    return Path(override).expanduser() if override else Path.home()


def sparkrun_config_dir() -> Path:
    """sparkrun's config folder (its `registries.yaml`): `~/.config/sparkrun`."""
    return _sparkrun_home() / ".config" / "sparkrun"


def sparkrun_registry_dir() -> Path:
    """Where sparkrun keeps its registry clones: `~/.cache/sparkrun/registries`."""
    return _sparkrun_home() / ".cache" / "sparkrun" / "registries"


def _safe_subpath(value: Any, where: str, key: str) -> str:
    if value is None:
        return ""
    text = str(value).strip()
    if text in ("/", "."):
        return text
    parts = PurePosixPath(text).parts
    if text.startswith("/") or any(p in ("..", "") for p in parts):
        raise InputError(
            f"{where}: `{key}: {text}` leaves the registry's folder",
            f"give `{key}` as a folder inside the repository, e.g. `{key}: recipes`",
        )
    return text


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}", "check the file's permissions") from None
    except yaml.YAMLError as exc:
        raise InputError(
            f"{path}: not valid YAML ({str(exc).splitlines()[0]})", "fix or remove the file"
        ) from None


def configured_registries(
    path: Path | None = None, cache_dir: Path | None = None
) -> list[Registry]:
    """The git registries spark-tui's config names, in config order (a missing file: none).

    ```yaml
    registries:
      - name: lab                  # the folder name of its clone
        url: https://github.com/me/my-recipes.git
        subpath: recipes           # default recipes
        mods_subpath: mods         # default mods
        ref: main                  # optional branch or tag
    ```
    """
    path = path or config_path()
    cache_dir = cache_dir or registry_cache_dir()
    if not path.is_file():
        return []
    data = _read_yaml(path) or {}
    if not isinstance(data, Mapping):
        raise InputError(f"{path}: expected a mapping", "see the example in the README")
    raw = data.get("registries") or []
    if not isinstance(raw, list):
        raise InputError(
            f"{path}: `registries` must be a list", "write `registries:` then `- name: ...` items"
        )
    out: list[Registry] = []
    for i, item in enumerate(raw):
        where = f"{path}: registries[{i}]"
        if not isinstance(item, Mapping) or not item.get("name") or not item.get("url"):
            raise InputError(
                f"{where}: a registry needs a `name` and a `url`",
                "write `- name: NAME` and `url: GIT_URL` (a local path works too)",
            )
        name = str(item["name"])
        if not _SAFE_NAME.fullmatch(name):
            raise InputError(
                f"{where}: registry name {name!r} is not usable as a folder name",
                "use letters, digits, '.', '_' or '-' (starting with a letter or digit)",
            )
        if any(r.name == name for r in out):
            raise InputError(f"{where}: registry {name!r} is named twice", "give each its own name")
        if item.get("enabled", True) is False:
            continue
        ref = item.get("ref")
        if str(item["url"]).startswith("-") or (ref and str(ref).startswith("-")):
            raise InputError(
                f"{where}: `url` and `ref` may not start with '-'",
                "give the repository URL (or a local path) and a branch or tag name",
            )
        out.append(
            Registry(
                name=name,
                kind="registry",
                root=cache_dir / name,
                subpath=_safe_subpath(item.get("subpath", "recipes"), where, "subpath"),
                mods_subpath=_safe_subpath(item.get("mods_subpath", "mods"), where, "mods_subpath"),
                url=str(item["url"]),
                ref=str(ref) if ref else None,
            )
        )
    return out


def sparkrun_registries(
    config_dir: Path | None = None,
    clone_dir: Path | None = None,
    errors: list[RecipeError] | None = None,
) -> list[Registry]:
    """sparkrun's registry clones on this machine, in the order of its `registries.yaml`
    (enabled ones with a clone only); without that file (or when it cannot be read: the
    problem goes to `errors`), every clone in its cache."""
    config_dir = config_dir or sparkrun_config_dir()
    clone_dir = clone_dir or sparkrun_registry_dir()
    listing = config_dir / "registries.yaml"
    entries: list[tuple[str, str, str, str, bool]] = []  # name, subpath, mods, url, visible
    data = None
    if listing.is_file():
        try:
            data = _read_yaml(listing)
        except InputError as exc:
            if errors is not None:
                errors.append(RecipeError(f"sparkrun's {exc.message}", exc.remedy))
    if isinstance(data, Mapping) and isinstance(data.get("registries"), list):
        for item in data["registries"]:
            if not isinstance(item, Mapping) or not item.get("name"):
                continue
            if item.get("enabled", True) is False:
                continue
            name = str(item["name"])
            default_sub, default_mods = SPARKRUN_DEFAULT_LAYOUT.get(name, ("recipes", ""))
            # An entry without a mods subpath gets the shipped registry's, as sparkrun
            # fills it in when it reads the file (a blank one makes mods unresolvable).
            mods = item.get("mods_subpath") or default_mods
            entries.append(
                (
                    name,
                    str(item.get("subpath", default_sub)),
                    str(mods),
                    str(item.get("url", "")),
                    item.get("visible", True) is not False,
                )
            )
    elif clone_dir.is_dir():
        known = list(SPARKRUN_DEFAULT_LAYOUT)
        found = sorted(
            (p.name for p in clone_dir.iterdir() if p.is_dir() and p.name[:1] not in "._"),
            key=lambda n: (known.index(n) if n in known else len(known), n),
        )
        for name in found:
            sub, mods = SPARKRUN_DEFAULT_LAYOUT.get(name, ("recipes", "mods"))
            entries.append((name, sub, mods, "", name not in SPARKRUN_HIDDEN))
    out = []
    for name, sub, mods, url, visible in entries:
        if not _SAFE_NAME.fullmatch(name) or not (clone_dir / name).is_dir():
            continue
        where = f"{listing}: {name}"
        try:
            sub, mods = _safe_subpath(sub, where, "subpath"), _safe_subpath(mods, where, "mods")
        except InputError:
            continue  # sparkrun refuses such an entry too
        out.append(Registry(name, "sparkrun", clone_dir / name, sub, mods, url, visible=visible))
    return out


def default_sources(
    user_dir: Path | None = None,
    bundled_dir: Path | None = None,
    errors: list[RecipeError] | None = None,
) -> Sources:
    """The sources of this machine: the user's folder, spark-tui's registries, sparkrun's
    clones and the bundled recipes.

    A broken spark-tui config raises, unless `errors` is given: then it is reported there
    and its registries are left out. sparkrun's own files never stop spark-tui.
    """
    try:
        registries = configured_registries()
    except InputError as exc:
        if errors is None:
            raise
        errors.append(RecipeError(exc.message, exc.remedy))
        registries = []
    return Sources(
        user_dir=user_dir if user_dir is not None else user_recipes_dir(),
        registries=registries,
        sparkrun=sparkrun_registries(errors=errors),
        bundled_dir=bundled_dir if bundled_dir is not None else bundled_recipes_dir(),
    )


# --- recipes ----------------------------------------------------------------------------


def _files(folder: Path, recursive: bool) -> list[Path]:
    if not folder.is_dir():
        return []
    if not recursive:
        return sorted(p for p in folder.iterdir() if p.suffix in RECIPE_SUFFIXES and p.is_file())
    out = []
    for p in folder.rglob("*"):
        rel = p.relative_to(folder).parts
        if p.suffix in RECIPE_SUFFIXES and p.is_file() and not any(s[:1] == "." for s in rel):
            out.append(p)
    # Flat files first (they win within a registry), then nested, each sorted.
    return sorted(out, key=lambda p: (len(p.relative_to(folder).parts), str(p)))


def _places(sources: Sources) -> list[tuple[Path, str, Registry | None]]:
    places: list[tuple[Path, str, Registry | None]] = []
    if sources.user_dir is not None:
        places.append((sources.user_dir, "user", None))
    for reg in sources.all_registries():
        places.append((reg.recipes_dir, reg.kind, reg))
    if sources.bundled_dir is not None:
        places.append((sources.bundled_dir, "bundled", None))
    return places


def _without_suffix(name: str) -> str:
    return name[: -len(Path(name).suffix)] if Path(name).suffix in RECIPE_SUFFIXES else name


def _sub_path(path: Path, reg: Registry) -> str | None:
    """`sub/NAME` for a recipe in a sub-folder of a registry's recipes folder, else None."""
    rel = path.relative_to(reg.recipes_dir).with_suffix("")
    return rel.as_posix() if len(rel.parts) > 1 else None


def _qualified(path: Path, reg: Registry | None, stems: set[str]) -> str | None:
    """The path-qualified name of a registry recipe its plain name does not reach (an
    earlier file of the registry has that name: flat files first, then nested, sorted), as
    sparkrun qualifies an ambiguous one; None when the plain name reaches it. `stems` holds
    the names seen so far in this registry and gets this one."""
    sub = _sub_path(path, reg) if reg is not None else None
    qualified = sub if sub is not None and path.stem in stems else None
    stems.add(path.stem)
    return qualified


def _load(
    path: Path, source: str, reg: Registry | None, sources: Sources, ref: str | None = None
) -> Recipe:
    recipe = load_recipe_file(path, source=source)
    if reg is not None:
        listed = ref or recipe.name
        sparkrun_name = None
        if reg.kind == "sparkrun":
            sparkrun_name = listed if reg.visible else f"@{reg.name}/{listed}"
        recipe = replace(recipe, registry=reg.name, ref=ref, sparkrun_name=sparkrun_name)
    return attach_prelaunch(recipe, sources)


def list_recipes(sources: Sources, errors: list[RecipeError] | None = None) -> list[Recipe]:
    """Every recipe of every source, sorted by name, then in clash order (see module doc).

    A broken file raises, unless `errors` is given: then its error is appended and the
    file skipped, so one bad recipe does not hide the others.
    """
    found: list[tuple[str, int, int, Recipe]] = []
    for order, (folder, source, reg) in enumerate(_places(sources)):
        stems: set[str] = set()
        for path in _files(folder, recursive=reg is not None):
            ref = _qualified(path, reg, stems)
            try:
                recipe = _load(path, source, reg, sources, ref)
            except RecipeError as exc:
                if errors is None:
                    raise
                errors.append(exc)
                continue
            found.append((recipe.name, order, len(found), recipe))
    return [r for *_, r in sorted(found, key=lambda t: t[:3])]


def shadowed(recipes: list[Recipe]) -> set[tuple[str, str]]:
    """(listed name, origin) of every recipe its listed name does not reach: an earlier one
    of the same listed name wins (the list in `list_recipes` order). A registry recipe that
    another of its registry hides by name is listed as `sub/NAME`, which reaches it."""
    seen: set[str] = set()
    hidden: set[tuple[str, str]] = set()
    for r in recipes:
        if r.listed_name in seen:
            hidden.add((r.listed_name, r.origin))
        seen.add(r.listed_name)
    return hidden


def find_recipe(name_or_path: str, sources: Sources) -> Recipe:
    """A recipe by path, `@REGISTRY/NAME`, or name (the first source that has it)."""
    candidate = Path(name_or_path).expanduser()
    if candidate.is_file():
        return attach_prelaunch(load_recipe_file(candidate, source="path"), sources)
    scope: str | None = None
    name = name_or_path
    if name.startswith("@") and "/" in name:
        scope, _, name = name[1:].partition("/")
        if sources.registry(scope) is None:
            known = ", ".join(r.name for r in sources.all_registries()) or "(none)"
            raise RecipeError(
                f"no registry named {scope!r}",
                f"use one of: {known}; registries are listed in {config_path()} "
                f"(spark-tui) and {sparkrun_config_dir() / 'registries.yaml'} (sparkrun)",
            )
    stem = Path(name).stem if Path(name).suffix in RECIPE_SUFFIXES else name
    # Only a recipe suffix is dropped: `3x-spark-cluster/qwen3.5-397b` keeps its `.5-397b`.
    sub = PurePosixPath(_without_suffix(name)) if "/" in name else None
    if sub is not None and (sub.is_absolute() or ".." in sub.parts or len(sub.parts) < 2):
        sub = None  # a file path that is not there
    elif sub is not None and name.startswith("."):
        sub = None
    if "\\" in name or ("/" in name and sub is None):
        raise RecipeError(
            f"recipe file {name_or_path!r} does not exist",
            "check the path, or give a recipe name (spark-tui recipes lists them)",
        )
    names: set[str] = set()
    for folder, source, reg in _places(sources):
        if scope is not None and reg is not sources.registry(scope):
            continue  # (spark-tui's registry of that name before sparkrun's)
        stems: set[str] = set()
        for path in _files(folder, recursive=reg is not None):
            ref = _qualified(path, reg, stems)
            # `sub/NAME` (sparkrun's path-qualified name) is a path under a registry's recipes.
            at = _sub_path(path, reg) if reg is not None else None
            if (sub is not None and at == str(sub)) or (sub is None and path.stem == stem):
                return _load(path, source, reg, sources, ref)
            names.add(ref or path.stem)
    if sub is not None and scope is None:
        raise RecipeError(
            f"recipe {name_or_path!r} is neither a file nor a recipe of a registry",
            "check the path, or give a recipe name or `@REGISTRY/SUB-FOLDER/NAME` "
            "(spark-tui recipes lists them)",
        )
    import difflib  # only for a name that is not there

    close = difflib.get_close_matches(stem, sorted(names), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    listing = ", ".join(sorted(names)[:30]) or "(none found)"
    raise RecipeError(
        f"no recipe named {stem!r}{hint}",
        f"use one of: {listing}; or give a path to a recipe file (user recipes live in "
        f"{sources.user_dir}; `spark-tui recipes --update` clones the registries of "
        f"{config_path()})",
    )


# --- mods and pre_exec --------------------------------------------------------------------


def _mod_refs(recipe: Recipe) -> list[str]:
    raw = recipe.extra.get("mods")
    if raw is None:
        # v1 recipes carried mods under runtime_config.
        runtime_config = recipe.extra.get("runtime_config")
        if isinstance(runtime_config, Mapping):
            raw = runtime_config.get("mods")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise RecipeError(
            f"{recipe.name}: `mods` must be a list of mod names",
            "write `mods:` then `- mods/NAME` lines",
        )
    refs = []
    for item in raw:
        if not isinstance(item, str) or not item.strip():
            raise RecipeError(
                f"{recipe.name}: mod entry {item!r} is not a mod name",
                "write each mod as a name or a path, e.g. `- mods/fix-chat-template`",
            )
        refs.append(item.strip())
    return refs


def _is_mod(path: Path) -> bool:
    return path.is_dir() and (path / "run.sh").is_file()


def resolve_mod(
    ref: str, recipe: Recipe, sources: Sources
) -> tuple[Path | None, str, tuple[str, ...]]:
    """Find one `mods:` entry as sparkrun does: (folder or None, where, every place tried).

    A leading `mods/` is ignored. `@REGISTRY/NAME` looks only in that registry's mods;
    otherwise: next to the recipe file (`<ref>`, then `mods/<ref>`), the recipe's own
    registry's mods folder, then the `eugr` registry's.
    """
    tried: list[str] = []
    scope: str | None = None
    rel = ref
    if rel.startswith("@") and "/" in rel:
        scope, _, rel = rel[1:].partition("/")
    rel = rel.removeprefix("mods/")
    if not rel or rel.startswith("/") or ".." in PurePosixPath(rel).parts:
        return None, "", (f"{ref} (not a folder name inside a mods folder)",)

    def in_registry(name: str | None) -> Path | None:
        if not name:
            return None
        reg = sources.registry(name)
        if reg is None:
            tried.append(f"@{name} (no such registry on this machine)")
            return None
        if reg.mods_dir is None:
            tried.append(f"@{name} (it has no mods folder)")
            return None
        candidate = reg.mods_dir / rel
        tried.append(str(candidate))
        return candidate if _is_mod(candidate) else None

    if scope is not None:
        hit = in_registry(scope)
        return hit, (f"registry {scope}" if hit else ""), tuple(tried)
    if recipe.path:
        base = Path(recipe.path).parent
        for candidate in (base / rel, base / "mods" / rel):
            tried.append(str(candidate))
            if _is_mod(candidate):
                return candidate, "next to the recipe", tuple(tried)
    hit = in_registry(recipe.registry)
    if hit is not None:
        return hit, f"registry {recipe.registry}", tuple(tried)
    if recipe.registry != EUGR_REGISTRY:
        hit = in_registry(EUGR_REGISTRY)
        if hit is not None:
            return hit, f"registry {EUGR_REGISTRY}", tuple(tried)
    return None, "", tuple(tried)


def _pre_exec_entries(recipe: Recipe) -> list[Any]:
    raw = recipe.extra.get("pre_exec")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise RecipeError(
            f"{recipe.name}: `pre_exec` must be a list",
            "write each entry as a shell command, or as `{copy: PATH, dest: CONTAINER_PATH}`",
        )
    return list(raw)


_ASSIGNMENT = re.compile(r"(?<![\w$])([A-Za-z_][A-Za-z0-9_]*)=(\S+)")
_FLAG_VALUE = re.compile(r"(?<!\S)(--[A-Za-z][\w-]*)(?:=|\s+)(\S+)")


def _literal_secret(command: str) -> str | None:
    """The name of a secret given a literal value in a shell command (`HF_TOKEN=hf_x`,
    `--token hf_x`), or None; a `$NAME` reference is fine."""
    for pattern in (_ASSIGNMENT, _FLAG_VALUE):
        for name, value in pattern.findall(command):
            if is_secret_name(name) and not value.lstrip("'\"").startswith("$"):
                return str(name)
    return None


def attach_prelaunch(recipe: Recipe, sources: Sources) -> Recipe:
    """The recipe with its `pre_exec` and `mods` resolved into prelaunch steps (the recipe's
    own entries first, then two per mod: copy and exec, as sparkrun orders them); what
    cannot be found goes to `missing` (never dropped)."""
    steps: list[PrelaunchStep] = []
    missing: list[MissingFile] = []
    base = Path(recipe.path).parent if recipe.path else None
    for entry in _pre_exec_entries(recipe):
        if isinstance(entry, str) and entry.strip():
            secret = _literal_secret(entry)
            if secret is not None:
                # The command is shown in plans and history: a literal secret would leak there.
                raise RecipeError(
                    f"{recipe.name}: a pre_exec command carries a literal value for {secret}",
                    f"write ${secret.upper().lstrip('-').replace('-', '_')} instead (the container "
                    "gets secrets from your shell at launch, e.g. HF_TOKEN); never the value",
                )
            steps.append(PrelaunchStep("exec", command=entry))
            continue
        if isinstance(entry, Mapping) and entry.get("copy") and entry.get("dest"):
            dest = str(entry["dest"])
            if not dest.startswith("/"):
                raise RecipeError(
                    f"{recipe.name}: pre_exec copy destination {dest!r} is not an absolute path",
                    "give `dest:` as a path in the container, e.g. /workspace/extra",
                )
            src = Path(str(entry["copy"])).expanduser()
            if not src.is_absolute() and base is not None:
                src = base / src
            if src.exists():
                steps.append(PrelaunchStep("copy", source=str(src.resolve()), dest=dest))
            else:
                missing.append(MissingFile(str(entry["copy"]), "pre_exec copy", (str(src),)))
            continue
        raise RecipeError(
            f"{recipe.name}: pre_exec entry {entry!r} is neither a command nor a copy",
            "write a shell command string, or `{copy: PATH, dest: CONTAINER_PATH}`",
        )
    refs = _mod_refs(recipe)
    for ref in refs:
        folder, _where, tried = resolve_mod(ref, recipe, sources)
        if folder is None:
            missing.append(MissingFile(ref, "mod", tried))
            continue
        name = folder.name
        dest = f"{CONTAINER_MODS_DIR}/{name}"
        steps.append(PrelaunchStep("copy", source=str(folder.resolve()), dest=dest, mod=name))
        steps.append(PrelaunchStep("exec", command=mod_exec(dest), mod=name))
    return replace(recipe, mods=refs, prelaunch=steps, missing=missing)


def mod_exec(dest: str) -> str:
    """A mod's exec step (sparkrun's wording; the folder is shell-quoted)."""
    import shlex

    return MOD_EXEC.format(dest=shlex.quote(dest))
