"""Load sparkrun v1/v2 recipe YAML into `Recipe`, and find recipes by name or path."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import platformdirs
import yaml

from spark_tui.core import safe_yaml
from spark_tui.core import settings_schema as schema
from spark_tui.core.errors import RecipeError
from spark_tui.core.fact_ranges import check_fact_ranges, check_finite_numbers
from spark_tui.core.recipe import Recipe
from spark_tui.core.render import placeholder_flags, placeholders, uses_escapes, value_setting
from spark_tui.core.safe_yaml import short_repr

# Top-level keys that map onto `Recipe` fields; every other key is kept in `Recipe.extra`.
_FIELD_KEYS = frozenset(
    {
        "recipe_version",
        "sparkrun_version",
        "description",
        "model",
        "model_revision",
        "runtime",
        "container",
        "min_nodes",
        "max_nodes",
        "defaults",
        "env",
        "command",
        "metadata",
        "executor_config",
    }
)
_RAY_RE = re.compile(r"--distributed-executor-backend(?:\s+|=)['\"]?ray\b")
_SGLANG_RE = re.compile(r"^(?:sglang\s+serve|python3?\s+-m\s+sglang\.launch_server)\b")
_LLAMA_CPP_RE = re.compile(r"^llama-server\b")
_SCALAR = (str, int, float, bool)
RECIPE_SUFFIXES = (".yaml", ".yml")


def _where(name: str, path: str | None) -> str:
    return path or name


def _load_yaml(text: str, name: str, path: str | None) -> Any:
    try:
        return safe_yaml.load(text)
    except yaml.YAMLError as exc:
        line, column, problem = safe_yaml.error_location(exc)
        loc = _where(name, path) if line is None else f"{_where(name, path)}:{line}:{column}"
        if isinstance(exc, safe_yaml.YamlLimitError):
            raise RecipeError(
                f"{loc}: YAML refused: {problem}",
                "a recipe is a few flat mappings: write the values out instead of nesting "
                "or repeating aliases (&name / *name)",
            ) from None
        raise RecipeError(
            f"{loc}: YAML syntax error: {problem}",
            "fix the YAML at that line and column (indentation, a missing ':' or an unclosed "
            "quote are the usual causes); JSON values in `command:` belong in single quotes",
        ) from None


def _type_error(where: str, key: str, expected: str, value: Any) -> RecipeError:
    return RecipeError(
        f"{where}: `{key}` must be {expected}, not {type(value).__name__} {short_repr(value)}",
        f"write `{key}` as {expected} in the recipe",
    )


def _node_count(where: str, data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(where, key, "a whole number of nodes (e.g. 2)", value)
    if value < 1:
        raise RecipeError(
            f"{where}: `{key}` is {value}; a recipe needs at least 1 node",
            f"set `{key}` to 1 or more",
        )
    return value


def _mapping(where: str, data: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _type_error(where, key, "a mapping (key: value lines)", value)
    return {str(k): v for k, v in value.items()}


def _string(where: str, data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, _SCALAR):
        raise _type_error(where, key, "a string", value)
    return str(value)


def _collapse_escapes(value: Any) -> Any:
    # v1 (str.format) recipes double literal braces in values too: `{{"a": 1}}`.
    if isinstance(value, str) and "{{" in value and "}}" in value:
        return value.replace("{{", "{").replace("}}", "}")
    return value


def resolve_runtime(declared: str | None, defaults: Mapping[str, Any], command: str) -> str:
    """sparkrun's alias resolution: `vllm` (or nothing) -> vllm-distributed, or vllm-ray on a Ray hint."""
    if declared not in (None, "", "vllm"):
        return str(declared)
    if declared in (None, ""):
        head = command.strip()
        if _SGLANG_RE.match(head):
            return "sglang"
        if _LLAMA_CPP_RE.match(head):
            return "llama-cpp"
    if str(defaults.get("distributed_executor_backend", "")).strip().lower() == "ray":
        return "vllm-ray"
    if _RAY_RE.search(command):
        return "vllm-ray"
    return "vllm-distributed"


def parse_recipe(text: str, name: str, source: str = "path", path: str | None = None) -> Recipe:
    """A `Recipe` from sparkrun v1 or v2 YAML text; `name` is the file stem."""
    where = _where(name, path)
    data = _load_yaml(text, name, path)
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise RecipeError(
            f"{where}: a recipe must be a YAML mapping, not {type(data).__name__}",
            'start the file with `recipe_version: "2"` and `model: ...` lines',
        )
    check_finite_numbers(data, where)
    version_raw = data.get("recipe_version", data.get("sparkrun_version", "2"))
    version = str(version_raw).strip()
    if version not in ("1", "2"):
        raise RecipeError(
            f"{where}: recipe_version {short_repr(version_raw)} is not supported",
            'use recipe_version: "2" (sparkrun v2) or "1" (v1)',
        )

    model = data.get("model")
    if model is None or (isinstance(model, str) and not model.strip()):
        raise RecipeError(
            f"{where}: the recipe has no `model`",
            "add `model: <hugging face repo id>`, e.g. model: openai/gpt-oss-120b",
        )
    if not isinstance(model, str):
        raise _type_error(where, "model", "a string (a Hugging Face repo id)", model)

    command = data.get("command")
    if command is None or (isinstance(command, str) and not command.strip()):
        raise RecipeError(
            f"{where}: the recipe has no `command`",
            "add `command: |` followed by `vllm serve {model} --flag value ...`",
        )
    if not isinstance(command, str):
        raise _type_error(where, "command", "a string (a `command: |` block)", command)

    defaults = {k: _collapse_escapes(v) for k, v in _mapping(where, data, "defaults").items()}
    escapes = uses_escapes(command, version)
    fed = placeholder_flags(command, escapes)
    for key, value in defaults.items():
        if value is not None and not isinstance(value, (*_SCALAR, Mapping, list)):
            raise _type_error(where, f"defaults.{key}", "a value", value)
        _check_known_default(where, key, value, fed.get(key))
    env_raw = _mapping(where, data, "env")
    env: dict[str, str] = {}
    for key, value in env_raw.items():
        if value is not None and not isinstance(value, _SCALAR):
            raise _type_error(where, f"env.{key}", "a string, number or boolean", value)
        if isinstance(value, bool):
            env[key] = "true" if value else "false"
        else:
            env[key] = "" if value is None else str(value)
    metadata = _mapping(where, data, "metadata")
    executor = _mapping(where, data, "executor_config")

    min_nodes = _node_count(where, data, "min_nodes")
    max_nodes = _node_count(where, data, "max_nodes")
    mode = data.get("mode")
    if mode == "solo" or data.get("solo_only"):
        min_nodes, max_nodes = 1, 1
    if data.get("cluster_only"):
        min_nodes = max(min_nodes or 1, 2)
    if min_nodes is not None and max_nodes is not None and min_nodes > max_nodes:
        raise RecipeError(
            f"{where}: min_nodes ({min_nodes}) is larger than max_nodes ({max_nodes})",
            "make min_nodes <= max_nodes",
        )
    for key in ("mods", "build_args"):
        if key in data and data[key] is not None and not isinstance(data[key], list):
            raise _type_error(where, key, "a list", data[key])

    for key in placeholders(command, escapes):
        if key in defaults:
            continue
        if key in schema.BUILTIN_PLACEHOLDERS and (key != "model_revision" or data.get(key)):
            continue
        raise RecipeError(
            f"{where}: placeholder {{{key}}} in `command:` has no value in `defaults:`",
            f"add `{key}: <value>` under `defaults:`, or write the value into the command",
        )

    _check_metadata_facts(where, model.strip(), metadata)
    declared = _string(where, data, "runtime")
    description = _string(where, data, "description") or str(metadata.get("description", ""))
    return Recipe(
        name=name,
        model=model.strip(),
        command=command,
        runtime=resolve_runtime(declared, defaults, command),
        runtime_declared=declared,
        recipe_version=version,
        description=description,
        model_revision=_string(where, data, "model_revision"),
        container=_string(where, data, "container"),
        min_nodes=min_nodes or 1,
        max_nodes=max_nodes,
        defaults=defaults,
        env=env,
        metadata=metadata,
        executor=executor,
        extra={str(k): v for k, v in data.items() if k not in _FIELD_KEYS},
        path=path,
        source=source,
    )


def _check_metadata_facts(where: str, model: str, metadata: Mapping[str, Any]) -> None:
    """The model facts the metadata gives must be readable and within a real model's range."""
    from spark_tui.core.model_facts import facts_from_metadata

    try:
        facts = facts_from_metadata(model, metadata)
    except RecipeError as exc:
        raise RecipeError(f"{where}: {exc.message}", exc.remedy) from None
    check_fact_ranges(facts, f"{where}: metadata")


def _check_known_default(where: str, key: str, value: Any, fed_flag: str | None) -> None:
    """A default for a known setting must have that setting's type (e.g. an int port); a
    default that is the value of another flag in the command, that flag's."""
    setting = value_setting(key, fed_flag)
    if setting is None or value is None:
        return
    if not isinstance(value, bool) and str(value).strip().lower() in setting.words:
        return
    kind = setting.kind
    ok = True
    if kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "float":
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "size":
        ok = isinstance(value, int | str) and not isinstance(value, bool)
        if ok and isinstance(value, str):
            try:
                schema.parse_size(value)
            except ValueError:
                ok = False
    elif kind == "json":
        ok = isinstance(value, Mapping) or (isinstance(value, str) and schema.is_json_object(value))
    elif kind in ("str", "choice"):
        ok = isinstance(value, str | int | float) and not isinstance(value, bool)
    fed = f" (it is the value of {fed_flag})" if setting.key != key else ""
    if not ok:
        raise _type_error(where, f"defaults.{key}", setting.accepted_form() + fed, value)
    if kind in ("int", "float") and not _in_range(value, setting):
        raise RecipeError(
            f"{where}: `defaults.{key}` is {short_repr(value)}, out of range{fed}",
            f"write `{key}` as {setting.accepted_form()}",
        )


def _in_range(value: float, setting: schema.Setting) -> bool:
    lo, hi = setting.minimum, setting.maximum
    if lo is not None and (value <= lo if setting.exclusive_minimum else value < lo):
        return False
    return hi is None or value <= hi


def load_recipe_file(path: str | Path, source: str = "path") -> Recipe:
    """Read and parse one recipe file; its name is the file stem."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecipeError(
            f"recipe file {str(p)!r} does not exist",
            "check the path, or give a recipe name (spark-tui recipes lists them)",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecipeError(
            f"cannot read recipe file {str(p)!r}: {exc}",
            "check the file's permissions and that it is UTF-8 YAML",
        ) from None
    return parse_recipe(text, p.stem, source=source, path=str(p))


def user_recipes_dir() -> Path:
    """The user's recipe folder: the platform config dir of spark-tui, then `recipes/`."""
    return Path(platformdirs.user_config_dir("spark-tui")) / "recipes"


def bundled_recipes_dir() -> Path:
    """The recipes shipped with spark-tui: the checkout's `recipes/`, or the wheel's copy."""
    package = Path(__file__).resolve().parent.parent
    checkout = package.parent / "recipes"
    if (package.parent / "pyproject.toml").is_file() and checkout.is_dir():
        return checkout
    return package / "_bundled" / "recipes"


def find_recipe(
    name_or_path: str, user_dir: Path | None = None, bundled_dir: Path | None = None
) -> Recipe:
    """A recipe by explicit path, `@REGISTRY/NAME`, or name: from the user's folder, the
    registries, or the bundled ones (clash order in core.registry); mods resolved."""
    from spark_tui.core import registry

    return registry.find_recipe(name_or_path, registry.default_sources(user_dir, bundled_dir))


def list_recipes(
    user_dir: Path | None = None,
    bundled_dir: Path | None = None,
    errors: list[RecipeError] | None = None,
) -> list[Recipe]:
    """Every recipe of every source, sorted by name, then in clash order (a user recipe
    before a registry's before the bundled one it shadows).

    A broken file (or config) raises, unless `errors` is given: then its error is appended
    and the file skipped, so one bad user recipe does not hide the others.
    """
    from spark_tui.core import registry

    sources = registry.default_sources(user_dir, bundled_dir, errors)
    return registry.list_recipes(sources, errors)


def shadowed(recipes: list[Recipe]) -> set[tuple[str, str]]:
    """(name, origin) of recipes hidden by an earlier one of the same name."""
    from spark_tui.core import registry

    return registry.shadowed(recipes)
