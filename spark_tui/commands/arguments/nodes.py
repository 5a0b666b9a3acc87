"""The arguments of the commands about recipes and nodes: `recipes`, `probe`, `check`, `plan`,
`models`, `images`."""

from __future__ import annotations

from typing import Any

from spark_tui.commands.arguments.common import json_flag, on, sets, targets


def recipes(sub: Any) -> None:
    p = sub.add_parser(
        "recipes", help="list the recipes: user, registries (spark-tui's and sparkrun's), bundled"
    )
    json_flag(p)
    p.add_argument(
        "--update", action="store_true", help="pull the git registries named in the config first"
    )


def probe(sub: Any) -> None:
    p = sub.add_parser("probe", help="probe nodes and print their facts")
    targets(p)
    json_flag(p)


def check(sub: Any) -> None:
    p = sub.add_parser(
        "check",
        help="does the recipe fit these nodes?",
        epilog="exit status: 0 fits (also with warnings); 1 does not fit, or unknown because "
        "a needed fact is missing (the findings name it); 2 bad input; 3 a node could not "
        "be reached",
    )
    p.add_argument("recipe")
    targets(p, facts=True)
    on(p)
    sets(p)
    json_flag(p)


def plan(sub: Any) -> None:
    p = sub.add_parser("plan", help="print the launch plan")
    p.add_argument("recipe")
    targets(p, facts=True)
    on(p)
    sets(p)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument(
        "--shell", action="store_true", help="the commands a person would type per node"
    )
    fmt.add_argument("--json", action="store_true", help="print JSON")


def models(sub: Any) -> None:
    p = sub.add_parser("models", help="the recipe's model (and draft) on every node")
    msub = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    p = msub.add_parser(
        "sync",
        help="download the model once, copy it node to node over the ConnectX link",
        epilog="exit status: 0 the model is complete on every node; 1 a download or copy "
        "failed (the message says how to go on: a rerun resumes); 2 bad input; 3 a node "
        "could not be reached",
    )
    p.add_argument("recipe")
    targets(p)
    on(p)
    sets(p, shortcuts=False)
    json_flag(p)


def images(sub: Any) -> None:
    p = sub.add_parser("images", help="the recipe's container image on every node")
    isub = p.add_subparsers(dest="images_command", metavar="ACTION", required=True)
    p = isub.add_parser(
        "sync",
        help="the head's image on every node: pulled where a registry gives it, else copied "
        "node to node (docker save | docker load)",
        epilog="exit status: 0 every node has the image with the head's image ID; 1 a pull "
        "or copy failed (the message says how to go on); 2 bad input; 3 a node could not "
        "be reached",
    )
    p.add_argument("recipe")
    targets(p)
    on(p)
    json_flag(p)
